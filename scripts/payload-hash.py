#!/usr/bin/env python3
"""Prints a SHA-256 of each tensor's bytes in driftlab model files (.dlm), and of all of them
together: the payload, whatever the header says (format version, metadata, policy string).

  python3 scripts/payload-hash.py runs/a/model.dlm [more.dlm ...]

Used to show that a change of code or of the file format left trained weights bit for bit the
same (docs/ARCHITECTURE.md, "Behaviour unchanged"). Reads format versions 1 and 2."""
import hashlib, json, struct, sys

def payload(path):
    b = open(path, 'rb').read()
    if b[:8] != b'DRIFTLAB':
        sys.exit(f'{path}: not a driftlab model file')
    version, hlen = struct.unpack_from('<IQ', b, 8)
    if version not in (1, 2):
        sys.exit(f'{path}: format version {version} is not known to this script')
    header = json.loads(b[20:20 + hlen])
    start = 20 + hlen
    out = []
    for t in header['tensors']:
        out.append((t['name'], b[start + t['offset']:start + t['offset'] + t['nbytes']]))
    return header, out

for path in sys.argv[1:]:
    header, tensors = payload(path)
    whole = hashlib.sha256()
    for name, data in tensors:
        whole.update(name.encode() + b'\0' + data)
    print(f'{whole.hexdigest()[:16]}  {path}  ({header["model"]}, {header["policy"]}, {len(tensors)} tensors)')
