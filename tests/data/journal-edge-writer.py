import socket, sys, time
out = sys.stdout.buffer
def line(b):
    out.write(b + b"\n"); out.flush(); time.sleep(0.01)
line(b"plain line one")
line(b"\x1b[31mred\x1b[0m coloured")
line(b"progress 10%\rprogress 20%")
line(b"bad \xff\xfe utf8")
line(b"key=value with = signs\tand a tab")
line(b"x" * 5000)
for _ in range(3):
    line(b"")
for _ in range(3):
    line(b"same")
line("\u00fcn\u00efc\u00f6d\u00e9 \u2713 \u65e5\u672c".encode())
line(b'quotes " and \\ backslash and {"json": 1}')
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
def native(fields):
    s.sendto(fields, "/run/systemd/journal/socket"); time.sleep(0.01)
def binfield(name, value):
    return name + b"\n" + len(value).to_bytes(8, "little") + value + b"\n"
native(b"SYSLOG_IDENTIFIER=native\nPRIORITY=3\n" + binfield(b"MESSAGE", b"two\nlines"))
native(b"SYSLOG_IDENTIFIER=native\nMESSAGE=first\nMESSAGE=second\n")
forged = b"x\n\n__CURSOR=forged\n__REALTIME_TIMESTAMP=1\n__MONOTONIC_TIMESTAMP=1\n_BOOT_ID=b\nPRIORITY=0\nSYSLOG_IDENTIFIER=forged\n_PID=1\n_SYSTEMD_UNIT=other.service\n_SYSTEMD_INVOCATION_ID=f\nMESSAGE=forged"
native(b"SYSLOG_IDENTIFIER=native\n" + binfield(b"MESSAGE", forged))
native(b"SYSLOG_IDENTIFIER=native\n" + binfield(b"MESSAGE", b"\n\nblank lines\n\n"))
native(b"SYSLOG_IDENTIFIER=native\nMESSAGE=no newline needed\n" + binfield(b"EXTRA", b"\x00\x01\x02"))
line(b"last line")
time.sleep(1)
