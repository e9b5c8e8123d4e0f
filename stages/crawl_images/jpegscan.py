"""A progressive JPEG's DC scans alone, for validation at 1/8 scale.

At 1/8 scale libjpeg's inverse DCT (``jpeg_idct_1x1``) computes each output pixel from its
block's DC coefficient only (ITU-T T.81 A.3.3: the 1x1 IDCT is the DC term). A progressive JPEG
(T.81 G.1) sends the DC coefficients in their own scans (``Ss = 0``: the first one, then any
successive-approximation refinements) and the AC coefficients in other scans (``Ss > 0``) that
make up most of the file and of the decoding time. :func:`dc_stream` returns the stream with the
AC scans left out, so Pillow's draft decode at 1/8 scale yields the very pixels of the whole file
(checked on every progressive image of ``benchmarks/_web.py`` and in
``tests/stages/crawl_images/test_jpegscan.py::test_dc_scans_decode_to_the_whole_files_pixels``), about 6x faster.

One libjpeg behaviour must be switched off for that: when a progressive file's AC coefficients
never arrive, libjpeg "smooths" the blocks (estimates low AC terms, and in libjpeg-turbo >= 2.1
adjusts DC) from the neighbours' DC. It does so only when the quantiser of the first AC
coefficient (zig-zag position 1) is non-zero (``smoothing_ok`` in ``jdcoefct.c``), so the returned
stream's quantisation tables have that entry set to 0. With no AC coefficient decoded the entry
multiplies nothing, and the DC quantisers are untouched.

Verification without the AC decode: the stream is walked marker by marker to its EOI, and it is
returned only if the whole file is there and libjpeg would accept every scan header, including
those of the scans left out (components of the frame, Huffman tables defined before use, valid
spectral selection and successive approximation). A truncated file, one without EOI, an
arithmetic-coded or baseline file, or any header libjpeg would refuse returns None: the caller
then decodes the whole file as before. What neither path sees is damage *inside* an AC scan's
entropy-coded data: libjpeg only warns about that (Pillow ignores its warnings), so a full decode
passes such a file too.
"""

from __future__ import annotations

import re

#: The next marker after entropy-coded data: 0xFF followed by neither a stuffed 0x00, a restart
#: marker (RST0-7, part of the scan) nor another 0xFF (fill byte before a marker).
_NEXT_MARKER = re.compile(rb"\xff(?![\x00\xd0-\xd7\xff])")
_SOF_OTHER = {0xC0, 0xC1, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_STANDALONE = {0x01, *range(0xD0, 0xD8)}  # TEM, RST0-7: no length field


def dc_stream(data: bytes) -> bytes | None:
    """``data`` (a whole JPEG file) without its AC scans, or None when the fast path does not apply.

    Returns bytes (a JPEG stream: every marker segment of ``data`` in order, every scan with
    ``Ss = 0`` with its entropy-coded data, the EOI; quantisation tables with zig-zag entry 1 set
    to 0) only for a complete, well-formed progressive Huffman JPEG (SOF2); None for anything else
    (see the module docstring). Never raises on bad input.
    """
    try:
        return _walk(data)
    except (IndexError, ValueError):
        return None


def _walk(data: bytes) -> bytes | None:
    n = len(data)
    if data[:2] != b"\xff\xd8":
        return None
    out: list[bytes] = [b"\xff\xd8"]
    components: set[int] = set()
    tables: set[tuple[int, int]] = set()  # (class 0 DC | 1 AC, id) of Huffman tables defined so far
    pos, dc_scans = 2, 0
    while True:
        if data[pos] != 0xFF:
            return None
        while data[pos + 1] == 0xFF:  # fill bytes
            pos += 1
        marker = data[pos + 1]
        if marker == 0xD9:  # EOI
            if not components or not dc_scans:
                return None
            out.append(b"\xff\xd9")
            return b"".join(out)
        if marker in _STANDALONE or marker in _SOF_OTHER or marker in (0xD8, 0xDC):  # stray, non-progressive, DNL
            return None
        end = pos + 2 + int.from_bytes(data[pos + 2 : pos + 4], "big")
        if end > n or end < pos + 4:
            return None
        seg = data[pos:end]
        if marker == 0xC2:  # SOF2: progressive, Huffman
            if components or seg[4] != 8 or len(seg) != 10 + 3 * seg[9]:
                return None
            components = {seg[10 + 3 * i] for i in range(seg[9])}
        elif marker == 0xC4:  # DHT
            k = 4
            while k < len(seg):
                counts = seg[k + 1 : k + 17]
                if len(counts) != 16 or seg[k] >> 4 > 1 or seg[k] & 15 > 3:
                    return None
                tables.add((seg[k] >> 4, seg[k] & 15))
                k += 17 + sum(counts)
            if k != len(seg):
                return None
        elif marker == 0xDB:  # DQT: zero the first AC quantiser of each table (module docstring)
            zeroed = _zero_first_ac(seg)
            if zeroed is None:
                return None
            seg = zeroed
        elif marker == 0xDA:  # SOS
            ss = _scan_start(seg, components, tables)
            if ss is None:
                return None
            found = _NEXT_MARKER.search(data, end)
            if found is None or found.start() + 1 >= n:
                return None  # cut inside the scan
            if ss == 0:
                out.append(data[pos : found.start()])
                dc_scans += 1
            pos = found.start()
            continue
        out.append(seg)
        pos = end


def _zero_first_ac(seg: bytes) -> bytes | None:
    """A DQT segment with each table's zig-zag entry 1 set to 0, or None if malformed."""
    b = bytearray(seg)
    k = 4
    while k < len(b):
        wide = b[k] >> 4
        if wide > 1:
            return None
        if wide:
            b[k + 3] = b[k + 4] = 0
        else:
            b[k + 2] = 0
        k += 1 + (128 if wide else 64)
    return bytes(b) if k == len(b) else None


def _scan_start(seg: bytes, components: set[int], tables: set[tuple[int, int]]) -> int | None:
    """An SOS header's Ss if libjpeg would accept the scan (progressive rules, T.81 G.1.1.1), else None."""
    ns = seg[4]
    if not components or not 1 <= ns <= 4 or len(seg) != 8 + 2 * ns:
        return None
    picked = [(seg[5 + 2 * i], seg[6 + 2 * i]) for i in range(ns)]
    ss, se, ah, al = seg[5 + 2 * ns], seg[6 + 2 * ns], seg[7 + 2 * ns] >> 4, seg[7 + 2 * ns] & 15
    if any(c not in components for c, _ in picked) or al > 13 or (ah and al != ah - 1):
        return None
    if ss == 0:
        if se != 0:
            return None
        if ah == 0 and any((0, t >> 4) not in tables for _, t in picked):
            return None  # a first DC scan decodes with its DC tables
    elif ns != 1 or se < ss or se > 63 or (1, picked[0][1] & 15) not in tables:
        return None
    return ss
