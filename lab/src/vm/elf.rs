//! Just enough ELF64 reading for the VM image: is a binary static (no
//! `PT_INTERP`), and what a kernel module's `.modinfo` says.

use anyhow::{bail, Context as _};

fn u16_at(b: &[u8], off: usize) -> anyhow::Result<u16> {
    let s = b.get(off..off + 2).context("truncated ELF")?;
    Ok(u16::from_le_bytes(s.try_into()?))
}

fn u32_at(b: &[u8], off: usize) -> anyhow::Result<u32> {
    let s = b.get(off..off + 4).context("truncated ELF")?;
    Ok(u32::from_le_bytes(s.try_into()?))
}

fn u64_at(b: &[u8], off: usize) -> anyhow::Result<usize> {
    let s = b.get(off..off + 8).context("truncated ELF")?;
    Ok(u64::from_le_bytes(s.try_into()?) as usize)
}

fn check_header(b: &[u8]) -> anyhow::Result<()> {
    // 64-bit, little-endian.
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        bail!("not a little-endian ELF64 file");
    }
    Ok(())
}

/// True when the executable names no dynamic loader (`PT_INTERP`).
pub fn is_static(b: &[u8]) -> anyhow::Result<bool> {
    const PT_INTERP: u32 = 3;
    check_header(b)?;
    let (phoff, phentsize, phnum) = (
        u64_at(b, 0x20)?,
        u16_at(b, 0x36)? as usize,
        u16_at(b, 0x38)? as usize,
    );
    for i in 0..phnum {
        if u32_at(b, phoff + i * phentsize)? == PT_INTERP {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The contents of the section called `name`, if there is one.
fn section<'a>(b: &'a [u8], name: &str) -> anyhow::Result<Option<&'a [u8]>> {
    check_header(b)?;
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(b, 0x28)?,
        u16_at(b, 0x3a)? as usize,
        u16_at(b, 0x3c)? as usize,
        u16_at(b, 0x3e)? as usize,
    );
    let header = |i: usize| shoff + i * shentsize;
    let strtab = u64_at(b, header(shstrndx) + 0x18)?;
    for i in 0..shnum {
        let h = header(i);
        let name_off = strtab + u32_at(b, h)? as usize;
        let rest = b.get(name_off..).context("truncated ELF")?;
        let end = rest.iter().position(|&c| c == 0).context("truncated ELF")?;
        if &rest[..end] == name.as_bytes() {
            let (off, size) = (u64_at(b, h + 0x18)?, u64_at(b, h + 0x20)?);
            return Ok(Some(b.get(off..off + size).context("truncated ELF")?));
        }
    }
    Ok(None)
}

/// The `depends=` list of a kernel module (names as the kernel spells them).
pub fn module_depends(ko: &[u8]) -> anyhow::Result<Vec<String>> {
    let Some(info) = section(ko, ".modinfo")? else {
        bail!("no .modinfo section: not a kernel module");
    };
    Ok(info
        .split(|&c| c == 0)
        .filter_map(|kv| kv.strip_prefix(b"depends="))
        .flat_map(|v| {
            String::from_utf8_lossy(v)
                .split(',')
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|d| !d.is_empty())
        .collect())
}
