#!/usr/bin/env python3
"""Independent reader of the .gmz stream format, written from docs/stream.md
(and the frame header of docs/codec.md), to check that gmtfc writes what the
document says.

    check_stream.py [--boundaries] STREAM ORIGINAL

Walks every stream in STREAM: checks magic, version, flags, block size and
header CRC; each frame's magic, header CRC and that its original length is
1..block size; the trailer's CRC, total length, frame count and the CRC-32C
of ORIGINAL's bytes and of the frame bytes; that the streams together hold len(ORIGINAL) bytes and
nothing follows the last trailer. Frame payloads are not decoded (gmtfc -d
does that). With --boundaries, prints every offset where an item starts
(0, after the header, after each frame) - the cuts a truncation test needs.
Exit 0 when everything holds, 1 with a message otherwise."""
import struct
import sys

HEADER_LEN, TRAILER_LEN = 16, 32
MAGIC, END = b"\x89GMZ", b"\x89EOS"
BLOCK_MAX = 16 << 20


def crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def check(cond, msg):
    if not cond:
        print("check_stream: " + msg, file=sys.stderr)
        sys.exit(1)


def frame_header_len(s, pos):
    """Header bytes of the frame at pos: version 1, 24 + 4K; version 2, 24,
    plus 3 bytes a BWT sample, the payload's CRC and the header's CRC for BWT
    frames (docs/codec.md)."""
    if s[pos + 4] == 2 and s[pos + 5] == 2:
        (orig,) = struct.unpack_from("<I", s, pos + 8)
        step = 32768 if orig > 256 * 1024 else 16384
        return 32 + 3 * max(1, (orig + step - 1) // step)
    return 24 + 4 * s[pos + 6]


def read_frame(s, pos, bs):
    check(len(s) - pos >= 24, "frame header cut at %d" % pos)
    check(s[pos:pos + 4] == b"GMTF", "bad frame magic at %d" % pos)
    k = s[pos + 6]
    h = 20 + 4 * k
    check(len(s) - pos >= h + 4, "frame header cut at %d" % pos)
    (hcrc,) = struct.unpack_from("<I", s, pos + h)
    check(hcrc == crc32c(s[pos:pos + h]), "frame header CRC at %d" % pos)
    check(s[pos + 4] in (1, 2), "frame version %d at %d" % (s[pos + 4], pos))
    orig, plen = struct.unpack_from("<II", s, pos + 8)
    check(1 <= orig <= bs, "frame original length %d not in 1..%d at %d" % (orig, bs, pos))
    hl = frame_header_len(s, pos)
    if hl > h + 4:  # version 2 BWT frame: samples, payload CRC, header CRC
        check(len(s) - pos >= hl, "frame header cut at %d" % pos)
        (pcrc, scrc) = struct.unpack_from("<II", s, pos + hl - 8)
        check(scrc == crc32c(s[pos:pos + hl - 4]), "frame sample CRC at %d" % pos)
        check(len(s) - pos - hl >= plen, "frame payload cut at %d" % pos)
        check(pcrc == crc32c(s[pos + hl:pos + hl + plen]), "frame payload CRC at %d" % pos)
    return hl + plen, orig


def main():
    args = sys.argv[1:]
    boundaries = args[:1] == ["--boundaries"]
    if boundaries:
        args = args[1:]
    s = open(args[0], "rb").read()
    orig = open(args[1], "rb").read()
    pos, done, cuts = 0, 0, []
    check(len(s) >= HEADER_LEN, "no stream header")
    while pos < len(s):
        cuts.append(pos)
        hdr = s[pos:pos + HEADER_LEN]
        check(len(hdr) == HEADER_LEN and hdr[:4] == MAGIC, "no stream header at %d" % pos)
        check(hdr[4] == 1 and hdr[5:8] == b"\0\0\0", "version/flags at %d" % pos)
        (bs, hcrc) = struct.unpack_from("<II", hdr, 8)
        check(hcrc == crc32c(hdr[:12]), "stream header CRC at %d" % pos)
        check(1 <= bs <= BLOCK_MAX, "block size %d" % bs)
        pos += HEADER_LEN
        frames, total, sizes, fstart = 0, 0, [], pos
        while True:
            cuts.append(pos)
            if s[pos:pos + 4] == END:
                break
            flen, olen = read_frame(s, pos, bs)
            pos += flen
            frames += 1
            total += olen
            sizes.append(olen)
        tr = s[pos:pos + TRAILER_LEN]
        check(len(tr) == TRAILER_LEN, "trailer cut at %d" % pos)
        t_total, t_frames, t_crc, t_fcrc, t_tcrc = struct.unpack_from("<QQIII", tr, 4)
        check(t_tcrc == crc32c(tr[:28]), "trailer CRC at %d" % pos)
        check(t_fcrc == crc32c(s[fstart:pos]), "frame bytes CRC at %d" % pos)
        check(t_total == total and t_frames == frames, "trailer counts at %d" % pos)
        check(all(n == bs for n in sizes[:-1]), "a frame other than the last is short")
        check(t_crc == crc32c(orig[done:done + total]), "content CRC at %d" % pos)
        done += total
        pos += TRAILER_LEN
    check(done == len(orig), "streams hold %d bytes, original has %d" % (done, len(orig)))
    check(crc32c(b"123456789") == 0xE3069283, "CRC-32C check value")
    if boundaries:
        print("\n".join(str(c) for c in cuts))


main()
