import json, re, sys
# pct_modes.py SKETCH.json EXACT.json: the same run summarized in both percentile modes.
# Every percentile and median key of the sketch's summary is within its stated relative
# bound (percentile_rel_error) of the exact one's; every other key is identical, but for
# the mode keys and the config (which records metrics.percentiles); some percentile
# differs (the sketch was used).
sk, ex = (json.load(open(p)) for p in sys.argv[1:3])
assert sk['percentile_mode'] == 'sketch' and ex['percentile_mode'] == 'exact', 'modes'
assert ex['percentile_rel_error'] == 0, 'exact bound'
bound = sk['percentile_rel_error']
assert bound == 0.01, bound
pct = re.compile(r'^(median|p[0-9.]+)_')
skip = {'config', 'percentile_mode', 'percentile_rel_error'}
bad, worst, n, differ = [], 0.0, 0, 0
def walk(x, y, path, key=''):
    global worst, n, differ
    if isinstance(x, dict) and isinstance(y, dict):
        if set(x) != set(y):
            bad.append(f'{path}: keys differ: {sorted(set(x) ^ set(y))}')
        for k in x.keys() & y.keys():
            if k not in skip:
                walk(x[k], y[k], f'{path}.{k}', k)
    elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for i, (u, v) in enumerate(zip(x, y)):
            walk(u, v, f'{path}[{i}]', key)
    elif pct.match(key) and x is not None and y is not None:
        n += 1
        differ += x != y
        r = abs(x - y) / abs(y) if y else (0.0 if x == 0 else float('inf'))
        worst = max(worst, r)
        if r > bound * (1 + 1e-12):
            bad.append(f'{path}: sketch {x}, exact {y}: {r:.4g} > {bound}')
    elif x != y:
        bad.append(f'{path}: sketch {x!r}, exact {y!r}')
walk(sk, ex, '')
if n == 0 or differ == 0:
    bad.append(f'{n} percentile values, {differ} differ: the sketch was not used')
print(f'{n} percentile values, worst relative difference {worst:.4g}')
print('\n'.join(bad))
sys.exit(1 if bad else 0)
