#!/usr/bin/env python3
"""Fails on an include that climbs a floor: a file of one library including a header of a library
it does not link (directly or through the libraries it links).

  python3 scripts/check-floors.py BUILD/floors.json          # the tree: exit 1 and one line per violation
  python3 scripts/check-floors.py BUILD/floors.json --planted # the check on two planted violations

The floors come from the build (CMakeLists.txt writes floors.json at configure time: each library's
folder and the driftlab libraries it links), so this script and the linker read the same table.
The build enforces the same rule for every file it compiles (each library's include root holds
only its own folder, docs/ARCHITECTURE.md); this check also covers headers no file includes yet,
and names the floors. tests/, bench/ and fuzz/ link every library; a library includes cli/ never."""
import json, os, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SUFFIXES = ('.h', '.cpp', '.cu', '.cuh')
# Folders outside the libraries and what they may include: every library.
TOP = ('tests/', 'bench/', 'fuzz/')


def load(path):
    libs = json.load(open(path))
    folders = {name: v['folder'].rstrip('/') + '/' for name, v in libs.items()}
    links = {name: v['links'] for name, v in libs.items()}
    closure = {}

    def reach(n):
        if n not in closure:
            closure[n] = set()
            for d in links[n]:
                closure[n] |= {d} | reach(d)
        return closure[n]

    floor = {}

    def level(n):
        if n not in floor:
            floor[n] = 1 + max((level(d) for d in links[n]), default=-1)
        return floor[n]

    for n in libs:
        reach(n)
        level(n)
    return folders, closure, floor


def owner(path, folders):
    """The library whose folder holds path (the longest folder that is a prefix), or None."""
    best = None
    for name, f in folders.items():
        if path.startswith(f) and (best is None or len(f) > len(folders[best])):
            best = name
    return best


def violations(files, folders, closure, floor):
    """files: (path relative to the root, text). Yields one message per include that climbs."""
    for path, text in files:
        src = owner(path, folders)
        top = path.startswith(TOP)
        if src is None and not top:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            hdr = m.group(1)
            dst = owner(hdr, folders)
            if dst is None:
                if hdr.startswith(TOP) and not top:
                    yield f'{path}:{n}: includes {hdr}, a header of the tests/benchmarks, from library {src}'
                continue
            if top:
                if dst == 'driftlab':
                    yield f'{path}:{n}: includes {hdr} of the command (cli/): no library or test may'
                continue
            if dst == src or dst in closure[src]:
                continue
            linked = ', '.join(sorted(closure[src])) or 'nothing'
            yield (f'{path}:{n}: includes {hdr} of {dst} (floor {floor[dst]}), which {src} (floor {floor[src]}) '
                   f'does not link (it links {linked}); declare the link in CMakeLists.txt if it belongs there, '
                   f'or move the code')


def tree_files():
    out = []
    for dirpath, dirs, files in os.walk(ROOT):
        rel = os.path.relpath(dirpath, ROOT)
        dirs[:] = [d for d in dirs if not d.startswith(('.', 'build')) and d != 'node_modules']
        for f in files:
            if f.endswith(SUFFIXES):
                p = os.path.normpath(os.path.join(rel, f))
                out.append((p, open(os.path.join(dirpath, f), errors='replace').read()))
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    folders, closure, floor = load(sys.argv[1])
    if '--planted' in sys.argv[2:]:
        # Two violations planted in files that are not in the tree: core/ (floor 0) reaching up to
        # the Policy, and attacks/ reaching sideways to models/, which it does not link.
        planted = [('core/planted.h', '#pragma once\n#include "engine/policy.h"\n'),
                   ('attacks/planted.cpp', '#include "attacks/gradient.h"\n#include "models/model_file.h"\n'),
                   ('quant/fine.cpp', '#include "models/model_file.h"\n#include "engine/policy.h"\n')]
        found = list(violations(planted, folders, closure, floor))
        for v in found:
            print(v)
        ok = len(found) == 2 and found[0].startswith('core/planted.h:2:') and found[1].startswith('attacks/planted.cpp:2:')
        print('check-floors --planted: ' + ('both planted violations found, the allowed includes passed' if ok
                                          else 'FAILED to find exactly the two planted violations'))
        sys.exit(0 if ok else 1)
    files = tree_files()
    found = list(violations(files, folders, closure, floor))
    for v in found:
        print(v)
    print(f'check-floors: {len(files)} files, {len(found)} include(s) climbing a floor')
    sys.exit(1 if found else 0)


if __name__ == '__main__':
    main()
