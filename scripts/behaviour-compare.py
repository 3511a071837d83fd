#!/usr/bin/python3
"""Compares two folders written by scripts/behaviour-runs.sh (the same commands run by two
builds) and says which files differ, timings and the build's commit set aside.

  /usr/bin/python3 scripts/behaviour-compare.py BEFORE_DIR AFTER_DIR   (Debian's, for python3-onnx)

What is set aside, and nothing else:
- JSON keys (in .json files and in the JSON headers of model files and checkpoints) and CSV
  columns whose name says they are a time or a rate: seconds, *_ms*, *per_s*, *time*, and the
  commit stamp (`commit`);
- in printed text (.out, .err, .md) and in the CSV cells of a `time` row: durations and rates
  (a number followed by s, ms, img/s, images/s, inputs/s, queries/s), and the two commits'
  hashes.
Every other byte must be equal. Exit 0 when all files match, 1 otherwise (each difference is
listed, with the first differing line of a text file)."""
import csv, io, json, os, re, sys

TIMING_KEY = re.compile(r'(^seconds$|_seconds|seconds_|_ms$|_ms_|^ms_|per_s|time|^commit$|elapsed)', re.I)
DURATION = re.compile(r'-?\d+(\.\d+)?(e[-+]?\d+)?\s?(s|ms|us|img/s|images/s|inputs/s|queries/s|GFLOP/s)\b')
TIME_ROW = re.compile(r'(time|load|per s|/s\b)', re.I)


HASHES = set()  # the commits the two folders were made by (commits() below)


def unhash(s):
    for h in sorted(HASHES, key=len, reverse=True):
        s = s.replace(h, '<commit>')
    return s


def mask_json(v):
    if isinstance(v, dict):
        return {k: ('<t>' if TIMING_KEY.search(k) else mask_json(x)) for k, x in v.items()}
    if isinstance(v, list):
        return [mask_json(x) for x in v]
    if isinstance(v, str):
        return unhash(v)
    return v


def commits(root):
    """Every 12-hex commit stamp a folder's JSON files carry."""
    out = set()
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith('.json'):
                out.update(re.findall(r'"commit":\s*"([0-9a-f]{7,40}[^"]*)"', open(os.path.join(dirpath, f), errors='replace').read()))
    return out


def onnx_canon(b):
    """An ONNX file with the producer's version (driftlab's commit) and the commit in metadata
    values masked; the graph, its initializers and everything else as written."""
    try:
        import onnx
    except ImportError:
        sys.exit('behaviour-compare: comparing .onnx files needs python3-onnx (run with /usr/bin/python3)')
    m = onnx.ModelProto()
    m.ParseFromString(b)
    m.producer_version = unhash(m.producer_version)
    for p in m.metadata_props:
        p.value = unhash(p.value)
    m.doc_string = unhash(m.doc_string)
    return m.SerializeToString()


def mask_text(s, hashes):
    for h in hashes:
        s = s.replace(h, '<commit>')
    lines = []
    for line in s.splitlines():
        if TIME_ROW.search(line):
            line = DURATION.sub('<t>', line)
            # a Markdown table row about a time: its numbers are timings
            if line.lstrip().startswith('|') and re.search(r'time|\(ms|ms\)|load', line, re.I):
                line = re.sub(r'\|\s*-?[\d.]+(e[-+]?\d+)?\s*(?=\|)', '| <t> ', line)
        lines.append(line)
    return '\n'.join(lines)


def mask_csv(s, hashes):
    for h in hashes:
        s = s.replace(h, '<commit>')
    rows = list(csv.reader(io.StringIO(s)))
    if not rows:
        return s
    head = rows[0]
    drop = {i for i, k in enumerate(head) if TIMING_KEY.search(k)}
    out = []
    for r in rows:
        if len(r) == len(head):
            r = ['<t>' if i in drop else c for i, c in enumerate(r)]
        elif len(r) > len(head) and any(c.startswith('{') for c in r):
            # an unquoted JSON cell spread over several: columns before it align from the left,
            # columns after it from the right
            j = next(i for i, c in enumerate(r) if c.startswith('{'))
            right = len(r) - len(head)
            r = ['<t>' if (i < j and i in drop) or (i > j + right and i - right in drop) else c
                 for i, c in enumerate(r)]
        elif TIME_ROW.search(','.join(r)):
            r = [DURATION.sub('<t>', c) for c in r]
        out.append(','.join(r))
    return '\n'.join(out)


def container(b):
    """A driftlab model file or checkpoint: (magic and version, masked JSON header, the tensors).
    The header's length and a checkpoint's closing CRC-32 change with the timings in its header,
    so they are left out (the CRC is checked by the reader, the tensors here byte for byte)."""
    i = b.find(b'{')
    if i < 0:
        return None
    try:
        header, end = json.JSONDecoder().raw_decode(b[i:].decode('latin-1'))
    except ValueError:
        return None
    rest = b[i + end:]
    if b[:6] == b'DLCKPT':
        rest = rest[:-4]
    return b[:12], mask_json(header), rest


def canon(path, hashes):
    b = open(path, 'rb').read()
    name = os.path.basename(path)
    if b[:8] == b'DRIFTLAB' or b[:6] == b'DLCKPT':
        c = container(b)
        if c:
            return c
    if name.endswith('.onnx'):
        return onnx_canon(b)
    if name.endswith('.json'):
        try:
            return mask_json(json.loads(b))
        except ValueError:
            pass
    if name.endswith('.csv'):
        return mask_csv(b.decode('utf-8', 'replace'), hashes)
    if name.endswith(('.out', '.err', '.md', '.txt')):
        return mask_text(b.decode('utf-8', 'replace'), hashes)
    return b


def files(root):
    out = set()
    for dirpath, _, fs in os.walk(root):
        for f in fs:
            out.add(os.path.relpath(os.path.join(dirpath, f), root))
    return out


def main():
    a, b = sys.argv[1], sys.argv[2]
    hashes = commits(a) | commits(b)
    HASHES.update(hashes)
    fa, fb = files(a), files(b)
    bad = 0
    for f in sorted(fa ^ fb):
        print(f'only in {a if f in fa else b}: {f}')
        bad += 1
    for f in sorted(fa & fb):
        ca, cb = canon(os.path.join(a, f), hashes), canon(os.path.join(b, f), hashes)
        if ca != cb:
            bad += 1
            detail = ''
            if isinstance(ca, str) and isinstance(cb, str):
                for la, lb in zip(ca.splitlines() + [''], cb.splitlines() + ['']):
                    if la != lb:
                        detail = f'\n    before: {la[:200]}\n    after:  {lb[:200]}'
                        break
            print(f'differs: {f}{detail}')
    n = len(fa & fb)
    print(f'behaviour-compare: {n} files compared, {bad} differ' + (' (timings and commit set aside)' if not bad else ''))
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
