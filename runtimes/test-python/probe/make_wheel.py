"""Builds probe-0.1.0-py3-none-any.whl from probe/ with the standard library only.

The wheel is byte-for-byte reproducible (stored, not deflated; fixed times and modes), so
its hash in ../requirements.lock holds wherever it is rebuilt:

    python3 make_wheel.py ../wheels
"""

import base64
import hashlib
import os
import sys
import zipfile

NAME, VERSION = "probe", "0.1.0"
DIST_INFO = f"{NAME}-{VERSION}.dist-info"
HERE = os.path.dirname(os.path.abspath(__file__))

METADATA = f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\nSummary: Joblet test runtime probe\n"
WHEEL = "Wheel-Version: 1.0\nGenerator: joblet make_wheel.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
ENTRY_POINTS = "[console_scripts]\nprobe-hello = probe:main\n"


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}\n"


def main(out_dir):
    with open(os.path.join(HERE, NAME, "__init__.py"), "rb") as f:
        init = f.read()
    files = [
        (f"{NAME}/__init__.py", init),
        (f"{DIST_INFO}/METADATA", METADATA.encode()),
        (f"{DIST_INFO}/WHEEL", WHEEL.encode()),
        (f"{DIST_INFO}/entry_points.txt", ENTRY_POINTS.encode()),
    ]
    record = "".join(record_line(p, d) for p, d in files) + f"{DIST_INFO}/RECORD,,\n"
    files.append((f"{DIST_INFO}/RECORD", record.encode()))
    os.makedirs(out_dir, exist_ok=True)
    wheel = os.path.join(out_dir, f"{NAME}-{VERSION}-py3-none-any.whl")
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_STORED) as z:
        for path, data in files:
            info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
    print(wheel)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "wheels"))
