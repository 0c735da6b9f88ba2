#!/bin/sh
# runsc-nvproxy-wrapper.sh: a stand-in for an nvproxy-capable gVisor runsc,
# for Joblet's end-to-end tests on hosts whose runsc is older (Debian's
# 0.0~20221219.0 has no nvproxy and no systrap).
#
# It answers these itself, as runsc release-20260831.0 would:
#   runsc --version                        (also -version, --version=true)
#   runsc flags                            (on stderr, like the real one)
#   runsc help                             (lists the nvproxy subcommand)
#   runsc help platforms                   (systrap, ptrace, kvm)
#   runsc nvproxy list-supported-drivers   (RUNSC_WRAPPER_DRIVERS, one a line)
# Anything else goes to the real runsc (exec), with the global flags (those
# before the subcommand) the old binary lacks rewritten:
#   --nvproxy, --nvproxy=V, --nvproxy-NAME=V, --nvproxy-NAME  dropped (the
#       value after a space-separated --nvproxy-driver-version or
#       --nvproxy-allowed-driver-capabilities is dropped too)
#   --platform=systrap, --platform systrap  become ptrace
# (one dash works like two, as in Go). Arguments from the subcommand on are
# passed unchanged, so `exec ID cmd --platform=systrap` keeps its own args.
#
# Every invocation first appends one line to the log: the arguments this
# script was given (not $0), each in POSIX-sh single quotes ('\'' for a quote),
# separated by spaces; `eval "set -- $line"` gives them back. An argument
# holding a newline continues the line inside its quotes.
#
# Settings (a daemon that runs this as an executor binary may not pass its
# environment through, so each can also come from a file):
#   RUNSC_WRAPPER_LOG      file to append the log lines to (unset: no log)
#   RUNSC_REAL             the real runsc (default /usr/bin/runsc)
#   RUNSC_WRAPPER_DRIVERS  supported drivers, comma- or space-separated
#                          (default: the 535/550/570/575/580 list below)
# The file is "<this script's path>.env" (e.g. runsc-nvproxy-wrapper.sh.env
# beside a copy of this script): lines NAME=VALUE with one of the names
# above, the value taken literally to the end of the line (no quotes, no
# expansion); other lines are ignored. A setting in the file wins over the
# same variable in the environment. Tests copy this script into a temp dir
# and write the .env file beside the copy.

set -u

conf="$0.env"
if [ -f "$conf" ]; then
	while IFS= read -r line || [ -n "$line" ]; do
		case $line in
		RUNSC_WRAPPER_LOG=*) RUNSC_WRAPPER_LOG=${line#*=} ;;
		RUNSC_REAL=*) RUNSC_REAL=${line#*=} ;;
		RUNSC_WRAPPER_DRIVERS=*) RUNSC_WRAPPER_DRIVERS=${line#*=} ;;
		esac
	done <"$conf"
fi
RUNSC_REAL=${RUNSC_REAL:-/usr/bin/runsc}
RUNSC_WRAPPER_DRIVERS=${RUNSC_WRAPPER_DRIVERS:-535.129.03 535.183.06 535.230.02 535.247.01 535.261.03 535.274.02 550.90.12 570.86.15 570.124.06 570.133.20 570.172.08 570.195.03 575.57.08 580.65.06 580.82.07 580.95.05 580.105.08}

# quote ARG: ARG as one POSIX-sh word in single quotes.
# The '.' sentinel keeps trailing newlines that $(...) would strip.
quote() {
	q=$(printf '%s.' "$1" | sed "s/'/'\\\\''/g")
	printf "'%s'" "${q%.}"
}

line=
for arg in "$@"; do
	line="$line${line:+ }$(quote "$arg")"
done
if [ -n "${RUNSC_WRAPPER_LOG:-}" ]; then
	printf '%s\n' "$line" >>"$RUNSC_WRAPPER_LOG" || exit 125
fi

# is_subcommand WORD: whether WORD names a runsc subcommand (ends the global flags).
is_subcommand() {
	case $1 in
	boot | checkpoint | create | debug | delete | do | events | exec | export-metrics | flags | \
		gofer | help | install | kill | list | metric-metadata | metric-server | mitigate | \
		nvproxy | pause | port-forward | ps | read-control | restore | resume | run | spec | \
		start | state | symbolize | tar | trace | umount | uninstall | usage | wait | write-control)
		return 0 ;;
	esac
	return 1
}

# Find the subcommand, and whether a global --version was given (runsc then
# prints its version whatever follows).
version=0
sub=
sub_args=
for arg in "$@"; do
	if [ -n "$sub" ]; then
		sub_args="$sub_args${sub_args:+ }$arg"
		continue
	fi
	case $arg in
	--version | -version | --version=true | -version=true) version=1 ;;
	esac
	if is_subcommand "$arg"; then
		sub=$arg
	fi
done

if [ "$version" = 1 ]; then
	printf 'runsc version release-20260831.0\nspec: 1.2.1\n'
	exit 0
fi

usage() {
	cat <<'EOF'
Usage: runsc <flags> <subcommand> <subcommand args>

runsc is the gVisor container runtime.

Functionality is provided by subcommands. For help with a specific subcommand,
use "runsc help <subcommand>".

Subcommands:
	create           create a secure container
	delete           delete resources held by a container
	exec             execute new process inside the container
	flags            describe all known top-level flags
	help             Print help documentation.
	kill             sends a signal to the container
	list             list containers started by runsc with the given root
	ps               ps displays the processes running inside a container
	run              create and run a secure container
	spec             create a new OCI bundle specification file
	start            start a secure container
	state            get the state of a container
	wait             wait on a process inside a container

Subcommands for helpers:
	install          adds a runtime to docker daemon configuration
	nvproxy          shows information about nvproxy support
	uninstall        removes a runtime from docker daemon configuration

Subcommands for internal use only:
	boot             launch a sandbox process
	gofer            launch a gofer process that proxies access to container files

Additional help topics (Use "runsc help <topic>" to see help on the topic):
	platforms        Print a list of available platforms.

Use "runsc flags" for a list of top-level flags
EOF
}

flags() {
	cat <<'EOF'
  -debug
    	enable debug logging.
  -debug-log string
    	additional location for logs. If it ends with '/', log files are created inside the directory with default names. The following variables are available: %TIMESTAMP%, %COMMAND%.
  -ignore-cgroups
    	don't configure cgroups.
  -log string
    	file path where internal debug information is written, default is stdout.
  -log-format string
    	log format: text (default), json, or json-k8s. (default "text")
  -network value
    	specifies which network to use: sandbox (default), host, none. Using network inside the sandbox is more secure because it's isolated from the host network.
  -nvproxy
    	LEGACY: enable support for Nvidia GPUs. GPU support gets automatically enabled if Nvidia devices are present in the OCI spec.
  -nvproxy-allow-unsupported-driver
    	allow nvproxy to be initialized with an unsupported driver version.
  -nvproxy-allowed-driver-capabilities string
    	Comma separated list of NVIDIA driver capabilities that are allowed to be requested by the container. If 'all' is specified here, it is resolved to all driver capabilities supported in nvproxy. If 'all' is requested by the container, it is resolved to this list. (default "utility,compute")
  -nvproxy-driver-version string
    	NVIDIA driver ABI version to use. If empty, autodetect installed driver version. The special value 'latest' may also be used to use the latest ABI.
  -platform string
    	specifies which platform to use: systrap (default), ptrace, kvm. (default "systrap")
  -root string
    	root directory for storage of container state, defaults are $XDG_RUNTIME_DIR/runsc, /var/run/runsc.
  -rootless
    	it allows the sandbox to be started with a user that is not root. Sandbox and Gofer processes may run with same privileges as current user.
  -systemd-cgroup
    	EXPERIMENTAL. Use systemd for cgroups.
  -version
    	show version and exit.
EOF
}

case "$sub:$sub_args" in
flags:)
	flags >&2
	exit 0 ;;
help:)
	usage
	exit 0 ;;
"help:platforms")
	printf 'systrap\nptrace\nkvm\n'
	exit 0 ;;
"nvproxy:list-supported-drivers")
	for driver in $(printf '%s' "$RUNSC_WRAPPER_DRIVERS" | tr ',' ' '); do
		printf '%s\n' "$driver"
	done
	exit 0 ;;
esac

# Rewrite the global flags, keep the rest, and run the real runsc.
new=
in_globals=1
skip_value=0
platform_value=0
for arg in "$@"; do
	if [ "$skip_value" = 1 ]; then
		skip_value=0
		continue
	fi
	if [ "$platform_value" = 1 ]; then
		platform_value=0
		[ "$arg" = systrap ] && arg=ptrace
	elif [ "$in_globals" = 1 ]; then
		if is_subcommand "$arg"; then
			in_globals=0
		else
			case $arg in
			--nvproxy | -nvproxy | --nvproxy=* | -nvproxy=* | --nvproxy-*=* | -nvproxy-*=*)
				continue ;;
			--nvproxy-driver-version | -nvproxy-driver-version | \
				--nvproxy-allowed-driver-capabilities | -nvproxy-allowed-driver-capabilities)
				skip_value=1
				continue ;;
			--nvproxy-* | -nvproxy-*)
				continue ;;
			--platform=systrap | -platform=systrap)
				arg=--platform=ptrace ;;
			--platform | -platform)
				platform_value=1 ;;
			esac
		fi
	fi
	new="$new${new:+ }$(quote "$arg")"
done
eval "set -- $new"
exec "$RUNSC_REAL" "$@"
