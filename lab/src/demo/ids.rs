//! Ids in Kubernetes' shapes for the demo's pod: a random UUID, and
//! random hex for container ids.

use std::fs;

pub(super) fn random_bytes<const N: usize>() -> anyhow::Result<[u8; N]> {
    use std::io::Read;
    let mut b = [0u8; N];
    fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b)
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A random (version 4) UUID, as Kubernetes gives pods.
pub(super) fn random_uuid() -> anyhow::Result<String> {
    let mut b = random_bytes::<16>()?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}
