#!/usr/bin/env python3
"""tests/http_spoken_check.py H5TABLE SIM.h5 SIM.json RUN.h5 RUN.json METRICS.txt - checks a
replay of experiments/engine/voice_sessions.json against a server (tests/http_replay.sh)
beside the simulator's run of the same config: every turn accounted for; the same spoken
turns and (within one) the same barge-ins; every barge-in the server was told of; each cut
where the workload puts it (the simulator's first audio + barge_in_s, within 10 ms); a cut
reply's heard tokens the whole tokens played; each next prompt the conversation as heard
and then the turn's own input."""
import json
import math
import re
import subprocess
import sys

h5table, sim_h5, sim_json, run_h5, run_json, metrics = sys.argv[1:7]


def table(path, name):
    rows = subprocess.run([h5table, path, name], capture_output=True, text=True,
                          check=True).stdout.splitlines()
    head = rows[0].split('\t')
    return [dict(zip(head, x.split('\t'))) for x in rows[1:]]


s, h = json.load(open(sim_json)), json.load(open(run_json))
assert h['requests'] == 24 and h['partial'] is False
assert sum(h[k] for k in ('completed', 'aborted', 'rejected', 'failed', 'unfinished')) == 24, h
assert h['failed'] == 0 and h['unfinished'] == 0, (h['failed'], h['unfinished'])
assert h['spoken_turns'] == s['spoken_turns'] == 24, (h['spoken_turns'], s['spoken_turns'])
assert abs(h['aborted'] - s['aborted']) <= 1 and h['aborted'] >= 3, (h['aborted'], s['aborted'])
assert h['http']['barge_ins'] == h['aborted'], h['http']
ev = h['http']['events']
assert ev['sent'] == ev['ok'] == ev['applied'] > 0 and ev['failed'] == 0, ev
assert not ev['unsupported']
m = re.search(r'^cadenza:barge_ins_total\{[^}]*\} (\S+)$', open(metrics).read(), re.M)
assert m and int(float(m.group(1))) == h['aborted'], (m and m.group(1), h['aborted'])

sa = {(r['session'], r['turn']): r for r in table(sim_h5, 'audio')}
ha = {(r['session'], r['turn']): r for r in table(run_h5, 'audio')}
assert len(ha) == 24
both = [k for k in ha if ha[k]['barged'] == '1' and sa[k]['barged'] == '1']
assert len(both) >= 3, both
for k in both:
    want = float(sa[k]['end_s']) - float(sa[k]['first_audio_s'])
    got = float(ha[k]['end_s']) - float(ha[k]['first_audio_s'])
    assert abs(got - want) <= 0.010, (k, got, want)
    assert float(ha[k]['heard_s']) <= got + 1e-6, (k, ha[k]['heard_s'], got)

hr = {(r['session'], int(r['turn'])): r for r in table(run_h5, 'requests')}
sr = {(r['session'], int(r['turn'])): r for r in table(sim_h5, 'requests')}
assert len(hr) == 24
for (si, t), r in hr.items():
    a = ha[(si, str(t))]
    if r['outcome'] == 'aborted':
        assert a['barged'] == '1'
        heard = math.floor(float(a['heard_s']) / 0.1 + 1e-9)
        assert int(r['heard_tokens']) == min(heard, int(r['output_tokens'])), \
            (si, t, r['heard_tokens'], a['heard_s'])
    else:
        assert r['outcome'] == 'completed' and r['heard_tokens'] == r['output_tokens'], r
        assert abs(float(a['heard_s']) - 0.1 * int(r['output_tokens'])) < 1e-6, (r, a)
    if t > 0:
        p = hr[(si, t - 1)]
        want = int(p['input_tokens']) + int(p['heard_tokens']) + int(sr[(si, t)]['input_tokens'])
        assert int(r['input_tokens']) == want, (si, t, r['input_tokens'], want)
assert h['heard_tokens'] == sum(int(r['heard_tokens']) for r in hr.values())
