//! One error type for the whole core. Every variant renders as ONE line that names where the
//! problem is (file and byte offset, config file and key), because users script against us and a
//! backtrace helps none of them.

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A trace file is malformed at a byte offset.
    #[error("{file}: byte {offset}: {msg}")]
    Trace { file: String, offset: u64, msg: String },
    /// A configuration (machine, policy, scenario) is wrong at a key.
    #[error("{file}: key '{key}': {msg}")]
    Config { file: String, key: String, msg: String },
    /// An operating-system I/O failure.
    #[error("{file}: {msg}")]
    Io { file: String, msg: String },
    /// A request that cannot be carried out (bad name, bad parameter).
    #[error("{0}")]
    Usage(String),
    /// The simulated system hit a condition it cannot continue from (e.g. out of simulated memory).
    #[error("simulation stopped: {0}")]
    Sim(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn trace(file: &str, offset: u64, msg: impl Into<String>) -> Error {
        Error::Trace { file: file.to_string(), offset, msg: msg.into() }
    }
    pub fn config(file: &str, key: &str, msg: impl Into<String>) -> Error {
        Error::Config { file: file.to_string(), key: key.to_string(), msg: msg.into() }
    }
    pub fn io(file: &str, e: &std::io::Error) -> Error {
        Error::Io { file: file.to_string(), msg: e.to_string() }
    }
    pub fn usage(msg: impl Into<String>) -> Error {
        Error::Usage(msg.into())
    }
}
