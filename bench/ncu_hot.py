"""Summarise an ncu source page (--page source --csv --print-source sass): the instructions with
the most warp-stall samples, with their SASS and the stall reasons that dominate them.
   python3 bench/ncu_hot.py SOURCE.csv [TOP]"""
import csv
import sys

rows = list(csv.reader(open(sys.argv[1], newline='')))
top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
hdr_i = next(i for i, r in enumerate(rows) if any('Source' == c or 'Source' in c for c in r) and len(r) > 5)
hdr = rows[hdr_i]
body = [r for r in rows[hdr_i + 1:] if len(r) == len(hdr)]
src = next(i for i, h in enumerate(hdr) if h == 'Source')
samp = next(i for i, h in enumerate(hdr) if 'Warp Stall Sampling (All' in h)
ex = next((i for i, h in enumerate(hdr) if h.startswith('Instructions Executed')), None)
stall_cols = [i for i, h in enumerate(hdr) if h.startswith('stall_')]


def num(s):
    try:
        return float(s.replace(',', ''))
    except ValueError:
        return 0.0


tot = sum(num(r[samp]) for r in body)
print(f'{len(body)} instructions, {tot:.0f} stall samples; columns with stalls: {[hdr[i] for i in stall_cols][:30]}')
order = sorted(range(len(body)), key=lambda i: -num(body[i][samp]))
for i in order[:top]:
    r = body[i]
    reasons = sorted(((num(r[c]), hdr[c]) for c in stall_cols), reverse=True)[:3]
    rs = ', '.join(f'{n}:{v:.0f}' for v, n in reasons if v > 0)
    print(f'{i:5d} {100 * num(r[samp]) / max(tot, 1):5.1f}%  ex {r[ex] if ex is not None else "?":>8}  {r[src][:70]:70s} {rs}')
