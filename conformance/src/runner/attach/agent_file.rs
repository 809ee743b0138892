//! Reading back a file the agent had in its hands (its KVP pool): it may have made it anything
//! (a FIFO would block a plain read for ever, a link to /dev/zero would never end, a sparse
//! file can claim any size). Shared by every attach mode.

use std::path::Path;

/// The most of an agent's pool file that is read back: 26,000 records, far beyond any agent's.
pub const POOL_READ_MAX: u64 = 64 << 20;

/// A file the agent could have replaced: read only if it is a regular file (not a link, FIFO,
/// device or socket), at most `cap` bytes. `Ok(None)`: it is gone.
pub(crate) fn read_agent_file(path: &Path, cap: u64) -> Result<Option<Vec<u8>>, String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err("is a symbolic link".into());
        }
        Err(e) => return Err(format!("cannot be opened: {e}")),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot be examined: {e}"))?;
    if !meta.is_file() {
        return Err("is not a regular file (a FIFO, socket or device)".into());
    }
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if bytes.len() as u64 > cap {
        return Err(format!("is larger than {cap} bytes"));
    }
    Ok(Some(bytes))
}
