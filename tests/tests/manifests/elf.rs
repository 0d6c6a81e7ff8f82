//! Just enough ELF64 to tell a static executable from a dynamic one: a
//! dynamic one names its loader (`PT_INTERP`) and the libraries it needs
//! (`DT_NEEDED` entries of `PT_DYNAMIC`). A static-pie has a `PT_DYNAMIC`
//! for its own relocations, but neither of those.

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;

#[derive(Debug, PartialEq, Eq)]
pub struct Linkage {
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

/// The parser against a binary known to be dynamic: this test executable
/// (glibc, built for the host) has a loader and needs libc.
#[test]
fn sees_a_dynamic_executable() {
    let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let l = linkage(&me).unwrap();
    assert!(!l.is_static(), "{l:?}");
    assert!(l.interp.as_deref().is_some_and(|i| i.contains("ld-")), "{l:?}");
    assert!(l.needed.iter().any(|n| n.starts_with("libc.so")), "{l:?}");
    assert!(linkage(b"#!/bin/sh\n").is_err());
}
