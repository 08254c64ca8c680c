//! Errors of the live face: each names the process and the file it concerns.

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The process exited (or never existed): not a failure of ours, callers stop cleanly.
    #[error("process {pid} is gone")]
    Gone { pid: i32 },
    /// The kernel refused to show us something: says what and how to get it.
    #[error("{path}: permission denied ({hint})")]
    Permission { path: String, hint: String },
    #[error("{path}: {msg}")]
    Io { path: String, msg: String },
    #[error("{path}: line {line}: {msg}")]
    Parse { path: String, line: usize, msg: String },
}

impl LiveError {
    /// Maps an I/O error on a /proc file of `pid` to the error a user can act on.
    pub fn from_io(pid: i32, path: &str, e: &std::io::Error) -> LiveError {
        match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ESRCH) => LiveError::Gone { pid },
            Some(libc::EACCES) | Some(libc::EPERM) => {
                LiveError::Permission { path: path.to_string(), hint: "run as the process's owner, or as root to see physical frames".to_string() }
            }
            _ => LiveError::Io { path: path.to_string(), msg: e.to_string() },
        }
    }
}
