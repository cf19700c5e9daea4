import json, re, sys
# docs_keys.py ROOT SUMMARY.json... : every top-level summary key is documented in
# docs/metrics.md ("## Summary JSON") or docs/playback.md ("## Summary keys cadenza writes"),
# and every key documented there appears in some summary.
root, files = sys.argv[1], sys.argv[2:]
def section(path, start, end):
    s = open(path).read()
    a = s.index(start)
    b = s.index(end, a + 1) if end else len(s)
    return s[a:b]
def names(text):
    text = re.sub(r'\([^()]*\)', '', text)
    return re.findall(r'`([a-z][a-z0-9_]*)`', text)
met = section(f'{root}/docs/metrics.md', '## Summary JSON', '## Results file')
dists, keys = set(), set()
table = None
for line in met.splitlines():
    if line.startswith('| distribution'):
        table = 'dist'
    elif line.startswith('| key'):
        table = 'key'
    elif line.startswith('|') and not line.startswith('|---') and table:
        first = line.split('|')[1]
        (dists if table == 'dist' else keys).update(names(first))
    elif not line.startswith('|'):
        table = None
pb = section(f'{root}/docs/playback.md', '## Summary keys cadenza writes', 'Statistics with no samples')
for line in pb.splitlines():
    if line.startswith('- '):
        keys.update(names(line.split(':')[0]))
stat = re.compile(r'^(mean|median|std|max|p[0-9.]+)_(.+)$')
seen = set()
bad = []
for f in files:
    for k in json.load(open(f)):
        seen.add(k)
        m = stat.match(k)
        if k not in keys and not (m and m.group(2) in dists):
            bad.append(f'{f}: key {k!r} is not in docs/metrics.md or docs/playback.md')
for k in sorted(keys):
    if k not in seen:
        bad.append(f'docs list {k!r} but no summary has it')
for d in sorted(dists):
    if not any(stat.match(k) and stat.match(k).group(2) == d for k in seen):
        bad.append(f'docs list the distribution {d!r} but no summary has it')
print('\n'.join(bad))
sys.exit(1 if bad else 0)
