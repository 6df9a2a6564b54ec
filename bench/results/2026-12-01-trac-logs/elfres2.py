"""Run trac: registers (EIATTR_REGCOUNT) and static shared memory (.nv.shared.<kernel>) of every kernel in
a binary's sm_90 cubins, for relabel.py (no cuobjdump on this machine).   python3 elfres2.py BINARY > res.txt"""
import struct, sys, subprocess
data=open(sys.argv[1],'rb').read()
out=subprocess.check_output(['readelf','-SW',sys.argv[1]]).decode()
for l in out.splitlines():
    if '.nv_fatbin' in l:
        f=l.split(']')[1].split(); off=int(f[3],16); size=int(f[4],16)
fb=data[off:off+size]
pos=0; res={}
while pos < len(fb):
    magic,ver,hsz,fsz=struct.unpack_from('<IHHQ',fb,pos)
    if magic!=0xBA55ED50: pos+=8; continue
    p=pos+hsz; end=p+fsz
    while p<end:
        kind,_,ehsz,psz=struct.unpack_from('<HHIQ',fb,p)
        pl=fb[p+ehsz:p+ehsz+psz]
        if kind==2 and pl[:4]==b'\x7fELF':
            e=pl
            shoff=struct.unpack_from('<Q',e,0x28)[0]; shentsize,shnum,shstrndx=struct.unpack_from('<HHH',e,0x3a)
            secs=[struct.unpack_from('<IIQQQQIIQQ',e,shoff+i*shentsize) for i in range(shnum)]
            stro=secs[shstrndx][4]
            def nm(o,base=stro): return e[base+o:e.index(b'\0',base+o)].decode()
            sh={nm(s[0]):s for s in secs}
            # symbols
            symt=sh.get('.symtab'); syms=[]
            if symt:
                strtab=secs[symt[6]][4]
                for i in range(symt[5]//24):
                    st_name,st_info,st_other,st_shndx,st_value,st_size=struct.unpack_from('<IBBHQQ',e,symt[4]+i*24)
                    syms.append(nm(st_name,strtab))
            regs={}
            for n,s in sh.items():
                if n.startswith('.nv.info'):
                    q=s[4]; qe=q+s[5]
                    while q<qe:
                        fmt,attr=e[q],e[q+1]; q+=2
                        if fmt==4:
                            sz=struct.unpack_from('<H',e,q)[0]; q+=2
                            if attr==0x2f:
                                fi,rc=struct.unpack_from('<II',e,q); regs[syms[fi] if fi<len(syms) else fi]=rc
                            q+=sz
                        elif fmt==3: q+=2
                        elif fmt==2: q+=1
                        elif fmt==1: pass
                        else: break
            for n,s in sh.items():
                if n.startswith('.text.'):
                    k=n[6:]
                    smem=sh.get('.nv.shared.'+k,(0,0,0,0,0,0))[5]
                    res[k]=(regs.get(k,-1),smem)
        p+=ehsz+psz
    pos=end
for k,(r,s) in sorted(res.items()): print(r,s,k)
