#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test/layers/check.py SRC BUILD - lib/README.md's layer map against the tree and the build.

The map's table lists the layers bottom up, one row per folder of lib/, with the folder's files.
Checked (TAP, one line each):
  1. the table's folders are exactly lib/'s folders, in the order lib/meson.build builds them;
  2. every .c and .h of a folder is in its row, and every file a row names is in its folder;
  3. no file includes a header of a higher folder (the build's include paths refuse it too);
  4. no layer's static library (BUILD/lib/libredlock-<layer>.a) leaves undefined a symbol that
     a higher layer's library defines: a call runs down or within its layer only (the build's
     per-layer links refuse it too: lib/meson.build);
  5. no call circle between files: the calls between the built objects (a file's undefined
     symbols that another file defines) form no cycle, of two files or more;
  6. the same for the files of the `redlock` tool (tools/, BUILD/tools/redlock.p/).
"""
import glob
import os
import re
import subprocess
import sys


def source_name(unit):
    """An object's source: .../libredlock-lock.a.p/lock_client.c.o is lock/client.c."""
    return os.path.basename(unit)[:-len('.o')].replace('_', '/', 1)


def strongly_connected(graph):
    """Tarjan's strongly connected components of graph (node -> nodes it points to)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    src, build = sys.argv[1], sys.argv[2]
    lib = os.path.join(src, 'lib')
    results = []

    def check(ok, what, detail=''):
        results.append((ok, what, detail))

    readme = open(os.path.join(lib, 'README.md'), encoding='utf-8').read()
    rows = re.findall(r'^\| `lib/([a-z]+)/` \| ([^|]*) \|', readme, re.M)
    table = [(folder, re.findall(r'`([a-z_]+\.[ch])`', files)) for folder, files in rows]
    folders = [f for f, _ in table]
    built = re.findall(r"^subdir\('([a-z]+)'\)", open(os.path.join(lib, 'meson.build')).read(),
                       re.M)
    on_disk = sorted(d for d in os.listdir(lib) if os.path.isdir(os.path.join(lib, d)))
    check(folders == built and sorted(folders) == on_disk,
          "lib/README.md's layers are lib/'s folders in the build's order",
          f'table {folders}, lib/meson.build {built}, on disk {on_disk}')

    rank = {f: i for i, f in enumerate(folders)}
    home = {}
    missing, extra = [], []
    for folder, listed in table:
        path = os.path.join(lib, folder)
        have = sorted(f for f in os.listdir(path) if f.endswith(('.c', '.h')))
        missing += [f'{folder}/{f}' for f in have if f not in listed]
        extra += [f'{folder}/{f}' for f in listed if f not in have]
        for f in have:
            home[f] = folder
    check(not missing and not extra, "every file of lib/ is in its folder's row, and no other",
          f'not in the map: {missing}; in the map, not in the folder: {extra}')

    upward = []
    for f, folder in sorted(home.items()):
        text = open(os.path.join(lib, folder, f), encoding='utf-8').read()
        for inc in re.findall(r'^#include "([a-z_]+\.h)"', text, re.M):
            if inc in home and rank[home[inc]] > rank[folder]:
                upward.append(f'{folder}/{f} includes {home[inc]}/{inc}')
    check(not upward, 'no file includes a header of a higher layer', '; '.join(upward))

    defined, undefined = {}, {}
    unit_defines, unit_needs = {}, {}
    for folder in folders:
        archive = os.path.join(build, 'lib', f'libredlock-{folder}.a')
        if not os.path.exists(archive):
            check(False, f'the {folder} layer is built', f'{archive} is missing')
            continue
        out = subprocess.run(['nm', '--defined-only', '-A', archive], capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in 'TDBRC':
                defined.setdefault(parts[2], folder)
                unit = parts[0].rsplit(':', 1)[0].rsplit(':', 1)[-1]
                unit_defines[parts[2]] = unit
        out = subprocess.run(['nm', '--undefined-only', '-A', archive], capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 2:
                unit = parts[0].rsplit(':', 1)[0].rsplit(':', 1)[-1]
                undefined.setdefault(folder, set()).add((unit, parts[-1]))
                unit_needs.setdefault(unit, set()).add(parts[-1])
    calls_up = sorted(f'{folder}: {unit} calls {sym} ({defined[sym]})'
                      for folder, syms in undefined.items() for unit, sym in syms
                      if sym in defined and rank[defined[sym]] > rank[folder])
    check(bool(defined) and not calls_up, 'no layer calls a higher one (the built libraries)',
          '; '.join(calls_up[:20]))
    calls = {u: sorted({unit_defines[sym] for sym in syms if sym in unit_defines} - {u})
             for u, syms in unit_needs.items()}
    circles = [c for c in strongly_connected(calls) if len(c) > 1]
    check(bool(calls) and not circles, 'no call circle between files (the built objects)',
          '; '.join(' <-> '.join(sorted(source_name(u) for u in c)) for c in circles))

    objects = sorted(glob.glob(os.path.join(build, 'tools', 'redlock.p', '*.o')))
    tool_defines, tool_needs = {}, {}
    for obj in objects:
        unit = os.path.basename(obj)[:-len('.c.o')] + '.c'
        out = subprocess.run(['nm', obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in 'TDBRC':
                tool_defines[parts[2]] = unit
            elif len(parts) == 2 and parts[0] == 'U':
                tool_needs.setdefault(unit, set()).add(parts[1])
    tool_calls = {u: sorted({tool_defines[s] for s in syms if s in tool_defines} - {u})
                  for u, syms in tool_needs.items()}
    tool_circles = [c for c in strongly_connected(tool_calls) if len(c) > 1]
    check(len(objects) > 1 and any(tool_calls.values()) and not tool_circles,
          "no call circle between the tool's files (tools/)",
          '; '.join(' <-> '.join(sorted(c)) for c in tool_circles) or f'{len(objects)} objects')

    print(f'1..{len(results)}')
    for i, (ok, what, detail) in enumerate(results, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {what}")
        if not ok and detail:
            print(f'# {detail}')
    return 0 if all(ok for ok, _, _ in results) else 1


if __name__ == '__main__':
    sys.exit(main())
