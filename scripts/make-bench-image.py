#!/usr/bin/env python3
"""Writes a deterministic RGB PNG (default 1024 x 768) for the vision benchmarks (scripts/bench-vision.sh):
smooth gradients plus a checkerboard and a fixed-seed noise term, so the encoder sees varied pixels. Standard
library only (zlib); the same file on every run.

    scripts/make-bench-image.py OUT.png [WIDTH HEIGHT]
"""
import struct
import sys
import zlib


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def main() -> int:
    if len(sys.argv) not in (2, 4):
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    w, h = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) == 4 else (1024, 768)
    state = 12345
    rows = bytearray()
    for y in range(h):
        rows.append(0)  # filter: none
        for x in range(w):
            state = (state * 1103515245 + 12345) & 0x7FFFFFFF
            noise = (state >> 16) & 31
            check = 48 if ((x // 64) + (y // 64)) % 2 else 0
            rows += bytes(((x * 255 // max(1, w - 1) + noise) & 255,
                           (y * 255 // max(1, h - 1) + check) & 255,
                           ((x + y) * 127 // max(1, w + h - 2) + noise + check) & 255))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(bytes(rows), 9)) + chunk(b"IEND", b"")
    with open(out, "wb") as f:
        f.write(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
