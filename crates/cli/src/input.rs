//! Reading the files the subcommands are given, as a Unix tool should: `-` is standard
//! input, and no input is read past a limit (`--max-input-bytes`), so an endless input
//! (`/dev/zero`, a pipe that never closes) or a huge one fails within the time and memory
//! that limit takes, instead of growing until the process is killed.

use std::cell::RefCell;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The default limit: 256 MiB, more than any object file or module these commands are for.
pub const DEFAULT_LIMIT: u64 = 256 << 20;

/// How inputs are read.
///
/// An input that can be read only once (standard input, a FIFO, a character device) and
/// is named twice (`locus stackmap f f`, a FIFO as two `--module`s) is read once: the
/// second read gets the same bytes, instead of opening the FIFO again and waiting forever
/// for a second writer.
#[derive(Debug)]
pub struct Input {
    /// Most bytes read from one input.
    pub limit: u64,
    /// What was read from each read-once input, by identity.
    once: RefCell<Vec<(ReadOnce, Vec<u8>)>>,
}

/// The identity of an input that can be read only once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadOnce {
    Stdin,
    /// Device and inode of a FIFO or device (`stat`, which does not open it).
    Node(u64, u64),
}

impl ReadOnce {
    /// `path`'s identity if it cannot be read twice; `None` for a regular file (or one
    /// that cannot be looked at: opening it gives the error).
    fn of(path: &Path) -> Option<ReadOnce> {
        if path == Path::new("-") {
            return Some(ReadOnce::Stdin);
        }
        let meta = std::fs::metadata(path).ok()?;
        (!meta.is_file() && !meta.is_dir()).then(|| ReadOnce::Node(meta.dev(), meta.ino()))
    }
}

impl Input {
    /// Reads inputs up to `limit` bytes each.
    pub fn new(limit: u64) -> Input {
        Input {
            limit,
            once: RefCell::new(Vec::new()),
        }
    }

    /// The bytes of `path` (`-`: standard input), or an error message naming it.
    pub fn read(&self, path: &Path) -> Result<Vec<u8>, String> {
        self.read_unnamed(path)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The bytes of `path`, or an error message for a caller that names the file itself.
    pub fn read_unnamed(&self, path: &Path) -> Result<Vec<u8>, String> {
        let Some(key) = ReadOnce::of(path) else {
            return self.read_file(path);
        };
        if let Some((_, bytes)) = self.once.borrow().iter().find(|(k, _)| *k == key) {
            return Ok(bytes.clone());
        }
        let bytes = match key {
            ReadOnce::Stdin => self.read_from(std::io::stdin().lock())?,
            ReadOnce::Node(..) => self.read_file(path)?,
        };
        self.once.borrow_mut().push((key, bytes.clone()));
        Ok(bytes)
    }

    fn read_file(&self, path: &Path) -> Result<Vec<u8>, String> {
        let file = File::open(path).map_err(|e| e.to_string())?;
        // A regular file that is too big is refused before reading any of it (a sparse 1 GB
        // file costs nothing to refuse).
        if let Ok(meta) = file.metadata() {
            if meta.is_file() && meta.len() > self.limit {
                return Err(self.too_big());
            }
        }
        self.read_from(file)
    }

    /// The text of `path`, which must be UTF-8.
    pub fn read_to_string(&self, path: &Path) -> Result<String, String> {
        let bytes = self.read(path)?;
        String::from_utf8(bytes).map_err(|e| format!("{}: not UTF-8 text: {e}", path.display()))
    }

    fn read_from(&self, from: impl Read) -> Result<Vec<u8>, String> {
        let mut bytes = Vec::new();
        from.take(self.limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| e.to_string())?;
        if bytes.len() as u64 > self.limit {
            return Err(self.too_big());
        }
        Ok(bytes)
    }

    fn too_big(&self) -> String {
        format!(
            "larger than the input limit of {} bytes (raise it with --max-input-bytes)",
            self.limit
        )
    }
}
