# Regenerates llama_quantize_rows.bin from the llama.cpp fixtures (see README.md).
import struct, sys
def read_gguf(path):
    b = open(path,'rb').read()
    o = 0
    def u(fmt):
        nonlocal o
        v = struct.unpack_from('<'+fmt, b, o); o += struct.calcsize('<'+fmt); return v[0]
    def s():
        nonlocal o
        n = u('Q'); v = b[o:o+n].decode('utf-8','replace'); o += n; return v
    sizes = {0:'B',1:'b',2:'H',3:'h',4:'I',5:'i',6:'f',7:'B',10:'Q',11:'q',12:'d'}
    def val(t):
        if t == 8: return s()
        if t == 9:
            et = u('I'); n = u('Q'); return [val(et) for _ in range(n)]
        return u(sizes[t])
    assert b[:4] == b'GGUF'; o = 4
    ver = u('I'); nt = u('q'); nkv = u('q')
    kv = {}
    for _ in range(nkv):
        k = s(); t = u('I'); kv[k] = val(t)
    tensors = []
    for _ in range(nt):
        name = s(); nd = u('I'); ne = [u('q') for _ in range(nd)]; t = u('I'); off = u('Q')
        tensors.append((name, ne, t, off))
    align = kv.get('general.alignment', 32)
    data = (o + align - 1)//align*align
    return b, kv, tensors, data
import sys, struct
F = '/work/shared/fixtures/llama-ref/models/'
bf, _, tf, df = read_gguf(F+'tiny-qwen35-f32.gguf')
fmap = {t[0]: t for t in tf}
bs = {8:(32,34), 12:(256,144), 14:(256,210)}
want = [('tiny-qwen35-q4_k_m.gguf','blk.0.attn_gate.weight'), ('tiny-qwen35-q4_k_m.gguf','blk.1.ssm_alpha.weight'),
        ('tiny-qwen35-q4_k_m.gguf','token_embd.weight'), ('tiny-qwen35-q4_k_m.gguf','blk.0.ffn_down.weight'),
        ('tiny-qwen35-q8_0.gguf','blk.0.attn_gate.weight'), ('tiny-qwen35-q8_0.gguf','blk.0.ffn_down.weight')]
ROWS = 8
out = open(sys.argv[1] if len(sys.argv) > 1 else 'llama_quantize_rows.bin', 'wb')
for qf, name in want:
    bq, _, tq, dq = read_gguf(F+qf)
    _, ne, t, off = [x for x in tq if x[0] == name][0]
    fn = fmap[name]
    blk, bb = bs[t]
    rows = min(ROWS, ne[1])
    rb = ne[0]//blk*bb
    out.write(struct.pack('<IqqQ', t, ne[0], rows, len(name))); out.write(name.encode())
    out.write(bf[df+fn[3]: df+fn[3] + rows*ne[0]*4]); out.write(bq[dq+off: dq+off+rows*rb])
    print(qf, name, t, ne, rows)
