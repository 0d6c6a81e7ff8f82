//! Just enough ELF64 to tell a static executable from a dynamic one: a
//! dynamic one names its loader (`PT_INTERP`) and the libraries it needs
//! (`DT_NEEDED` entries of `PT_DYNAMIC`). A static-pie has a `PT_DYNAMIC`
//! for its own relocations, but neither of those. And the machine it is
//! built for (`e_machine`).

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
/// `e_machine` of an x86-64 executable.
pub const EM_X86_64: u16 = 62;
/// `e_machine` of an arm64 executable.
pub const EM_AARCH64: u16 = 183;

#[derive(Debug, PartialEq, Eq)]
pub struct Linkage {
    /// The machine it runs on: [`EM_X86_64`], [`EM_AARCH64`], ...
    pub machine: u16,
    /// The program interpreter, if any (`/lib64/ld-linux-x86-64.so.2`).
    pub interp: Option<String>,
    /// The shared libraries it needs.
    pub needed: Vec<String>,
}

impl Linkage {
    pub fn is_static(&self) -> bool {
        self.interp.is_none() && self.needed.is_empty()
    }
}

fn get<const N: usize>(b: &[u8], off: usize) -> Result<[u8; N], String> {
    b.get(off..off.checked_add(N).ok_or("offset overflow")?)
        .map(|s| s.try_into().unwrap())
        .ok_or_else(|| format!("truncated ELF: {N} bytes at {off:#x}"))
}
fn u16_at(b: &[u8], off: usize) -> Result<usize, String> {
    Ok(u16::from_le_bytes(get(b, off)?) as usize)
}
fn u32_at(b: &[u8], off: usize) -> Result<u32, String> {
    Ok(u32::from_le_bytes(get(b, off)?))
}
fn u64_at(b: &[u8], off: usize) -> Result<u64, String> {
    Ok(u64::from_le_bytes(get(b, off)?))
}

fn c_str(b: &[u8], off: usize) -> Result<String, String> {
    let rest = b.get(off..).ok_or("string past the end of the file")?;
    let end = rest.iter().position(|&c| c == 0).ok_or("unterminated string")?;
    Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
}

struct Segment {
    kind: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

/// Reads the loader and the needed libraries of a little-endian ELF64 file.
pub fn linkage(b: &[u8]) -> Result<Linkage, String> {
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return Err("not a little-endian ELF64 file".into());
    }
    let (phoff, phentsize, phnum) = (u64_at(b, 0x20)? as usize, u16_at(b, 0x36)?, u16_at(b, 0x38)?);
    let mut segments = Vec::with_capacity(phnum);
    for i in 0..phnum {
        let h = phoff + i * phentsize;
        segments.push(Segment {
            kind: u32_at(b, h)?,
            offset: u64_at(b, h + 0x08)?,
            vaddr: u64_at(b, h + 0x10)?,
            filesz: u64_at(b, h + 0x20)?,
        });
    }
    // Addresses in the dynamic section are virtual: find them in the file.
    let file_offset = |vaddr: u64| {
        segments
            .iter()
            .find(|s| s.kind == PT_LOAD && (s.vaddr..s.vaddr + s.filesz).contains(&vaddr))
            .map(|s| (vaddr - s.vaddr + s.offset) as usize)
            .ok_or_else(|| format!("address {vaddr:#x} is in no loaded segment"))
    };

    let mut out = Linkage {
        machine: u16_at(b, 0x12)? as u16,
        interp: None,
        needed: Vec::new(),
    };
    for s in &segments {
        match s.kind {
            PT_INTERP => out.interp = Some(c_str(b, s.offset as usize)?),
            PT_DYNAMIC => {
                let (mut needed, mut strtab) = (Vec::new(), None);
                for e in (s.offset..s.offset + s.filesz).step_by(16) {
                    let (tag, val) = (u64_at(b, e as usize)?, u64_at(b, e as usize + 8)?);
                    match tag {
                        DT_NULL => break,
                        DT_NEEDED => needed.push(val),
                        DT_STRTAB => strtab = Some(val),
                        _ => {}
                    }
                }
                if !needed.is_empty() {
                    let strtab = file_offset(strtab.ok_or("DT_NEEDED without DT_STRTAB")?)?;
                    for n in needed {
                        out.needed.push(c_str(b, strtab + n as usize)?);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// `e_machine` of an eBPF object.
pub const EM_BPF: u16 = 247;
const ET_REL: usize = 1;
const SHT_NOBITS: u32 = 8;

/// The eBPF objects embedded whole in a file (as the agent embeds its
/// kernel programs): each relocatable ELF64 for [`EM_BPF`], from its magic
/// to the end of its last section or of its section header table.
pub fn embedded_bpf_objects(b: &[u8]) -> Vec<&[u8]> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(i) = b[at..].windows(6).position(|w| w == b"\x7fELF\x02\x01") {
        let start = at + i;
        match bpf_object_len(&b[start..]) {
            Ok(len) => {
                found.push(&b[start..start + len]);
                at = start + len;
            }
            Err(_) => at = start + 1,
        }
    }
    found
}

fn bpf_object_len(b: &[u8]) -> Result<usize, String> {
    if u16_at(b, 0x10)? != ET_REL || u16_at(b, 0x12)? as u16 != EM_BPF {
        return Err("not a relocatable eBPF object".into());
    }
    let (shoff, shentsize, shnum) = (u64_at(b, 0x28)? as usize, u16_at(b, 0x3a)?, u16_at(b, 0x3c)?);
    let mut end = shoff
        .checked_add(shentsize * shnum)
        .ok_or("section header table past the end")?;
    for i in 0..shnum {
        let h = shoff + i * shentsize;
        if u32_at(b, h + 4)? != SHT_NOBITS {
            end = end.max((u64_at(b, h + 0x18)? + u64_at(b, h + 0x20)?) as usize);
        }
    }
    if end > b.len() {
        return Err("truncated eBPF object".into());
    }
    Ok(end)
}

/// The sections of an ELF64 object: (name, contents; empty for NOBITS).
pub fn sections(b: &[u8]) -> Result<Vec<(String, &[u8])>, String> {
    let (shoff, shentsize, shnum) = (u64_at(b, 0x28)? as usize, u16_at(b, 0x3a)?, u16_at(b, 0x3c)?);
    let strndx = u16_at(b, 0x3e)?;
    let header = |i: usize| -> Result<(u32, u32, usize, usize), String> {
        let h = shoff + i * shentsize;
        Ok((
            u32_at(b, h)?,
            u32_at(b, h + 4)?,
            u64_at(b, h + 0x18)? as usize,
            u64_at(b, h + 0x20)? as usize,
        ))
    };
    let names = header(strndx)?.2;
    let mut out = Vec::with_capacity(shnum);
    for i in 0..shnum {
        let (name, kind, offset, size) = header(i)?;
        let data = match kind {
            SHT_NOBITS => &b[..0],
            _ => b
                .get(offset..offset + size)
                .ok_or_else(|| format!("section {i} past the end"))?,
        };
        out.push((c_str(b, names + name as usize)?, data));
    }
    Ok(out)
}
