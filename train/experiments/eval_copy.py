exec(open(__import__('os').path.join(__import__('os').path.dirname(__file__), 'common.py')).read())
rng = np.random.default_rng(1)
m = model(2,128); m.load_state_dict(torch.load(sys.argv[1]))
for L in [64, 128, 256]:
  for kind in ['half','var']:
    ids = rng.integers(3, 4096, size=(32, L)); mask = np.zeros((32, L), bool)
    for r in range(32):
        if kind=='half':
            ids[r, L//2:] = ids[r, :L//2]; mask[r, L//2+1:] = True
        else:
            ln = int(rng.integers(8, L//4)); dst = int(rng.integers(L//2, L-ln+1)); src = int(rng.integers(0, dst-ln+1))
            ids[r, dst:dst+ln] = ids[r, src:src+ln]; mask[r, dst+1:dst+ln] = True
    ids=torch.as_tensor(ids); mask=torch.as_tensor(mask)
    with torch.no_grad():
        h = m.hidden(ids)[:, :-1]; tm = mask[:, 1:]
        print(L, kind, F.cross_entropy(m.logits(h[tm]), ids[:, 1:][tm]).item())
