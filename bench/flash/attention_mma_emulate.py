#!/usr/bin/env python3
# Lane-by-lane numpy emulation of src/kernels/cuda/smxx_attention.cu (dec2, 2026-11-30):
# the m16n8k16 bf16 fragment layouts as the PTX ISA defines them, the kernel's per-lane
# q / entry / p indexing, the three-piece splits and the MMA path vote, the online
# softmax and the slice merge, against a float64 oracle. Written to check the
# indexing and the accuracy prediction without a GPU (bench/flash/NOTES.md, dec2
# section); it does not model the partial-tile skips, RoPE or timing. ~1-2 min.
import numpy as np
f32=np.float32
def bf16(x):
    x=np.asarray(x,dtype=f32); u=x.view(np.uint32).astype(np.uint64)
    r=((u+0x7fff+((u>>16)&1))>>16)<<16
    return r.astype(np.uint32).view(f32)
def split3(x,y):
    out=[]
    for v in (x,y):
        h=bf16(v); r=f32(f32(v)-h); m=bf16(r); l=bf16(f32(r-m)); out.append((h,m,l))
    return [(out[0][i],out[1][i]) for i in range(3)]  # hi,mid,lo as pairs (low, high)
def mma(D, A, B):
    # D: [32][4], A: [32][4] pairs, B: [32][2] pairs
    Am=np.zeros((16,16)); Bm=np.zeros((16,8)); Cm=np.zeros((16,8))
    for lane in range(32):
        g,t=lane>>2,lane&3
        for r,(row,col) in enumerate([(g,2*t),(g+8,2*t),(g,2*t+8),(g+8,2*t+8)]):
            Am[row,col],Am[row,col+1]=A[lane][r]
        for r,k in enumerate([2*t,2*t+8]):
            Bm[k,g],Bm[k+1,g]=B[lane][r]
        Cm[g,2*t],Cm[g,2*t+1],Cm[g+8,2*t],Cm[g+8,2*t+1]=D[lane]
    R=(Am@Bm+Cm).astype(f32)
    for lane in range(32):
        g,t=lane>>2,lane&3
        D[lane]=[R[g,2*t],R[g,2*t+1],R[g+8,2*t],R[g+8,2*t+1]]
def mma_split(D,Afr,vals):  # Afr: dict piece->[32][4]; vals: [32]->(v00,v01,v10,v11)
    Bp=[[None,None] for _ in range(32)]
    pieces={k:[[None,None] for _ in range(32)] for k in ('h','m','l')}
    inexact=False
    for lane in range(32):
        v00,v01,v10,v11=vals[lane]
        s0=split3(v00,v01); s1=split3(v10,v11)
        for i,k in enumerate('hml'): pieces[k][lane]=[s0[i],s1[i]]
        if any(x!=0 for p in (s0[1],s0[2],s1[1],s1[2]) for x in p): inexact=True
    terms=[('l','h'),('h','l'),('m','m'),('m','h'),('h','m'),('h','h')] if inexact else [('l','h'),('m','h'),('h','h')]
    for a,b in terms: mma(D,Afr[a],pieces[b])
kTile=32;kLd=520;kSLd=40;S=8;HB=16
def run_block(q,kv,ids,b,e,sink,scale,heads,dim,t,g0):
    cnt=e-b; outs={}
    parts=[]
    for s in range(S):
        chunk=(cnt+S-1)//S; j0=min(b+s*chunk,e); j1=min(j0+chunk,e); L=j1-j0; nt_=(L+kTile-1)//kTile
        # q frags per warp
        qa=[]
        for w in range(8):
            fr={k:[[None]*4 for _ in range(32)] for k in 'hml'}
            frs=[]
            for ks in range(4):
                fr={k:[[None]*4 for _ in range(32)] for k in 'hml'}
                for lane in range(32):
                    gr,qd=lane>>2,lane&3
                    h0=g0+gr;h1=h0+8
                    def ld(h,d): return q[t,h,d] if h<heads and d<dim else f32(0)
                    d0=w*64+16*ks+2*qd; d1=d0+8
                    for r,(h,d) in enumerate([(h0,d0),(h1,d0),(h0,d1),(h1,d1)]):
                        sp=split3(ld(h,d),ld(h,d+1))
                        for i,k in enumerate('hml'): fr[k][lane][r]=sp[i]
                frs.append(fr)
            qa.append(frs)
        o=[[[[f32(0)]*4 for _ in range(32)] for _ in range(8)] for _ in range(8)]  # [w][nt][lane][4]
        o=[[[ [f32(0)]*4 for lane in range(32)] for nt in range(8)] for w in range(8)]
        m_run=np.full(HB,-np.inf,dtype=f32); l_run=np.zeros(HB,dtype=f32)
        tile=np.full((kTile,kLd),np.nan,dtype=f32); tile[:,dim:]=0
        for it in range(nt_):
            c=min(L-it*kTile,kTile)
            for r in range(kTile):
                tile[r,:512]=0 if r>=c else 0
                if r<c: tile[r,:dim]=kv[ids[j0+it*kTile+r]]
            sp=np.zeros((8,HB,kSLd),dtype=f32)
            for w in range(8):
                for nt in range(4):
                    acc=[[f32(0)]*4 for _ in range(32)]
                    for ks in range(4):
                        vals=[]
                        for lane in range(32):
                            gr,qd=lane>>2,lane&3
                            base=w*64+2*qd+16*ks; row=8*nt+gr
                            vals.append((tile[row,base],tile[row,base+1],tile[row,base+8],tile[row,base+9]))
                        mma_split(acc,qa[w][ks],vals)
                    for lane in range(32):
                        gr,qd=lane>>2,lane&3
                        sp[w,gr,8*nt+2*qd:8*nt+2*qd+2]=acc[lane][0:2]
                        sp[w,gr+8,8*nt+2*qd:8*nt+2*qd+2]=acc[lane][2:4]
            pr=np.zeros((HB,kSLd),dtype=f32); corr=np.zeros(HB,dtype=f32)
            for lh in range(HB):
                dot=sp[0,lh,:32].copy()
                for w in range(1,8): dot=f32(dot+sp[w,lh,:32])
                x=np.where(np.arange(32)<c,f32(dot*f32(scale)),-np.inf).astype(f32)
                mn=max(m_run[lh],x.max()); cf=np.exp(f32(m_run[lh]-mn)) if m_run[lh]>-np.inf else f32(0)
                p=np.where(np.arange(32)<c,np.exp((x-mn).astype(np.float64)),0).astype(f32)
                l_run[lh]=f32(l_run[lh]*cf+p.sum()); m_run[lh]=mn; pr[lh,:32]=p; corr[lh]=cf
            for w in range(8):
                for nt in range(8):
                    for lane in range(32):
                        gr=lane>>2
                        o[w][nt][lane]=[o[w][nt][lane][0]*corr[gr],o[w][nt][lane][1]*corr[gr],o[w][nt][lane][2]*corr[gr+8],o[w][nt][lane][3]*corr[gr+8]]
                for ks in range(2):
                    pa={k:[[None]*4 for _ in range(32)] for k in 'hml'}
                    for lane in range(32):
                        gr,qd=lane>>2,lane&3; k0=16*ks+2*qd
                        for r,(h,k) in enumerate([(gr,k0),(gr+8,k0),(gr,k0+8),(gr+8,k0+8)]):
                            spp=split3(pr[h,k],pr[h,k+1])
                            for i,kk in enumerate('hml'): pa[kk][lane][r]=spp[i]
                    for nt in range(8):
                        vals=[]
                        for lane in range(32):
                            gr,qd=lane>>2,lane&3; k0=16*ks+2*qd; ch=w*64+gr+8*nt
                            vals.append((tile[k0,ch],tile[k0+1,ch],tile[k0+8,ch],tile[k0+9,ch]))
                        mma_split(o[w][nt],pa,vals)
        xacc=np.zeros((HB,512),dtype=f32)
        for w in range(8):
            for nt in range(8):
                for lane in range(32):
                    gr,qd=lane>>2,lane&3; d=w*64+8*nt+2*qd
                    xacc[gr,d:d+2]=o[w][nt][lane][0:2]; xacc[gr+8,d:d+2]=o[w][nt][lane][2:4]
        parts.append((m_run.copy(),l_run.copy(),xacc))
    out=np.zeros((HB,dim),dtype=f32)
    for lh in range(HB):
        h=g0+lh
        if h>=heads: continue
        M=max([sink[h]]+[p[0][lh] for p in parts])
        d=np.exp(np.float64(sink[h]-M)); num=np.zeros(512)
        for p in parts:
            wgt=np.exp(np.float64(p[0][lh]-M)) if p[0][lh]>-np.inf else 0.0
            d+=p[1][lh]*wgt; num+=p[2][lh]*wgt
        out[lh]=(num/d)[:dim]
    return out
rng=np.random.default_rng(5)
for heads,dim,cnt,exact in [(16,512,300,0),(16,512,300,1),(3,100,45,0),(20,512,5,1)]:
    pool=200
    q=rng.standard_normal((1,heads,dim)).astype(f32)
    kv=(rng.standard_normal((pool,dim))*2).astype(f32)
    if exact: kv=bf16(kv)
    ids=rng.integers(0,pool,cnt); sink=(rng.standard_normal(heads)*2).astype(f32); scale=1/np.sqrt(dim)
    s=q[0].astype(np.float64)@kv[ids].astype(np.float64).T*scale
    m=np.maximum(s.max(1),sink); p=np.exp(s-m[:,None]); den=p.sum(1)+np.exp(sink-m)
    ref=(p@kv[ids].astype(np.float64))/den[:,None]
    got=np.zeros((heads,dim))
    for g0 in range(0,heads,16):
        blk=run_block(q,kv,ids,0,cnt,sink,scale,heads,dim,0,g0)
        hh=min(16,heads-g0); got[g0:g0+hh]=blk[:hh]
    rms=np.sqrt((ref**2).mean()); print(heads,dim,cnt,exact,"err/rms",np.abs(got-ref).max()/rms,flush=True)
