#!/usr/bin/env python3
"""Regenerates the package map in docs/architecture.md from the tree: each
production package (its BUILD file's opening comment) and each of its
files (the first sentence of its opening comment; a .cc with a header of the
same name shares the header's row). Writes between the markers
<!-- map:begin --> and <!-- map:end -->. Also checks that the production
files that read the wall clock directly (absl::Now()) are those the table
between <!-- wallclock:begin --> and <!-- wallclock:end --> names, each
with its reason.

  /usr/bin/python3 scripts/architecture-map.py          rewrite the map
  /usr/bin/python3 scripts/architecture-map.py --check  exit 1 if stale
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, 'docs', 'architecture.md')
TOPS = ('proto', 'common', 'server', 'worker', 'tools', 'python')
SOURCES = ('.h', '.cc', '.cu', '.proto', '.py')


def opening_comment(path):
    if path.endswith('.py'):
        # A Python file's docstring.
        text = open(path, encoding='utf-8').read()
        m = re.match(r'\s*(?:#[^\n]*\n\s*)*[rb]?"""(.*?)"""', text, re.S)
        return ' '.join(m.group(1).split()) if m else ''
    lines = []
    with open(path, encoding='utf-8') as f:
        for line in f:
            s = line.strip()
            if s.startswith(('load(', 'package(')) or (not s and not lines):
                continue
            if not s.startswith(('//', '#')) or s.startswith('#include') or \
                    s.startswith(('#ifndef', '#define', '#pragma')):
                break
            lines.append(s.lstrip('/#').strip())
    return ' '.join(l for l in lines if l)


def first_sentence(text, limit=160):
    m = re.match(r'(.+?\.)(\s|$)', text)
    s = m.group(1) if m else text
    if len(s) > limit:
        s = s[:limit].rsplit(' ', 1)[0] + ' …'
    return s.replace('|', '\\|')


def tracked():
    # Tracked files and new ones git does not ignore, so a file is mapped
    # before its first commit.
    out = subprocess.check_output(
        ['git', 'ls-files', '--cached', '--others', '--exclude-standard'],
        cwd=ROOT).decode()
    return [p for p in out.split('\n') if p.startswith(TOPS)]


def nearest_package(path, packages):
    d = os.path.dirname(path)
    while d and d not in packages:
        d = os.path.dirname(d)
    return d


def build_map():
    files = tracked()
    packages = sorted({os.path.dirname(p) for p in files
                       if os.path.basename(p) == 'BUILD'})
    rows = ['| package | what it holds | files |', '| --- | --- | --- |']
    for pkg in packages:
        about = first_sentence(opening_comment(os.path.join(ROOT, pkg, 'BUILD')),
                               limit=400) or '—'
        # The package's files: those whose nearest BUILD is the package's.
        own = sorted(p for p in files if p.endswith(SOURCES)
                     and nearest_package(p, packages) == pkg)
        stems = {}
        for p in own:
            stems.setdefault(os.path.splitext(p)[0], []).append(p)
        cells = []
        for stem, group in sorted(stems.items()):
            exts = sorted(os.path.splitext(p)[1] for p in group)
            lead = next((p for p in group if p.endswith('.h')), group[0])
            name = os.path.relpath(stem, pkg)
            label = (f'`{name}{exts[0]}`' if len(exts) == 1 else
                     f'`{name}.{{{",".join(e[1:] for e in exts)}}}`')
            what = first_sentence(opening_comment(os.path.join(ROOT, lead)))
            if not what and len(group) > 1:
                what = first_sentence(opening_comment(os.path.join(ROOT, group[-1])))
            cells.append(f'{label} {what}' if what else label)
        rows.append(f'| `{pkg}/` | {about} | {"<br>".join(cells)} |')
    return '\n'.join(rows) + '\n'


def wall_clock_problems(doc):
    """Differences between the production files that call absl::Now() and
    the files the doc's wall-clock table names."""
    begin, end = '<!-- wallclock:begin -->', '<!-- wallclock:end -->'
    table = doc[doc.index(begin):doc.index(end)]
    listed = set(re.findall(r'`([\w/.-]+\.(?:cc|h))`', table))
    readers = {p for p in tracked() if p.endswith(('.cc', '.h'))
               and 'absl::Now()' in open(os.path.join(ROOT, p),
                                         encoding='utf-8').read()}
    problems = [f'{p} reads absl::Now() but the wall-clock table in '
                'docs/architecture.md does not say why'
                for p in sorted(readers - listed)]
    problems += [f'{p} is in the wall-clock table of docs/architecture.md '
                 'but reads no absl::Now()' for p in sorted(listed - readers)]
    return problems


def main():
    doc = open(DOC, encoding='utf-8').read()
    problems = wall_clock_problems(doc)
    for p in problems:
        print(p)
    begin, end = '<!-- map:begin -->\n', '<!-- map:end -->'
    i, j = doc.index(begin) + len(begin), doc.index(end)
    new = doc[:i] + build_map() + doc[j:]
    if '--check' in sys.argv:
        if new != doc:
            print('docs/architecture.md: the package map is stale; run '
                  'scripts/architecture-map.py')
            return 1
        return 1 if problems else 0
    open(DOC, 'w', encoding='utf-8').write(new)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
