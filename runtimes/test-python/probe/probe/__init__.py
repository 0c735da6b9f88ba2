"""Probe package of Joblet's test runtime: proves that a locked wheel was installed."""

import sys


def hello():
    return "probe ok"


def main():
    print(hello())
    print("\n".join(sys.path))
