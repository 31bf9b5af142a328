//! The LLVM side of the stack map benches: a C++ file of `benches/` compiled against LLVM 19
//! (`clang++-19`, `llvm-config-19`; `LOCUS_BENCH_CXX` and `LOCUS_BENCH_LLVM_CONFIG` override
//! them) into a shared library in the target directory, and its `extern "C"` functions
//! looked up by name.

use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Compiles `benches/NAME.cpp` into `libNAME.so` in the target directory (again only when
/// the source is newer than the library) and returns the library's path.
fn build(name: &str) -> Result<PathBuf, String> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("benches/{name}.cpp"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("locus-stackmap-bench");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let lib = dir.join(format!("lib{name}.so"));
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(built), Some(src)) = (modified(&lib), modified(&source)) {
        if built >= src {
            return Ok(lib);
        }
    }
    let cxx = std::env::var("LOCUS_BENCH_CXX").unwrap_or_else(|_| "clang++-19".into());
    let config =
        std::env::var("LOCUS_BENCH_LLVM_CONFIG").unwrap_or_else(|_| "llvm-config-19".into());
    let cxxflags = run(Command::new(&config).arg("--cxxflags"))?;
    let libdir = run(Command::new(&config).arg("--libdir"))?;
    let libdir = libdir.trim();
    let libs = run(Command::new(&config).arg("--libs"))?;
    let mut cmd = Command::new(&cxx);
    cmd.args(cxxflags.split_whitespace())
        .args(["-O2", "-DNDEBUG", "-fPIC", "-shared", "-o"])
        .arg(&lib)
        .arg(&source)
        .arg(format!("-L{libdir}"))
        .args(libs.split_whitespace())
        .arg(format!("-Wl,-rpath,{libdir}"));
    eprintln!("building the LLVM anchor: {cmd:?}");
    run(&mut cmd)?;
    Ok(lib)
}

/// The anchor library `libNAME.so`, built if needed and loaded for the life of the process.
pub struct Anchor {
    handle: *mut c_void,
    path: PathBuf,
}

impl Anchor {
    /// Builds (if needed) and loads `benches/NAME.cpp`.
    pub fn load(name: &str) -> Result<Anchor, String> {
        let path = build(name)?;
        let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: `c` is a NUL-terminated string; the library's initialisers are LLVM's.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(format!("dlopen {} failed", path.display()));
        }
        Ok(Anchor { handle, path })
    }

    /// The address of the library's function `name`.
    pub fn symbol(&self, name: &str) -> Result<*mut c_void, String> {
        let c = CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: `handle` is a live handle (never closed) and `c` is NUL-terminated.
        let p = unsafe { libc::dlsym(self.handle, c.as_ptr()) };
        if p.is_null() {
            Err(format!("{name} not found in {}", self.path.display()))
        } else {
            Ok(p)
        }
    }

    /// The library's function `name` as the function pointer type `F`.
    ///
    /// # Safety
    /// `F` must be the function's signature (an `unsafe extern "C" fn`); the library stays
    /// loaded for the life of the process.
    pub unsafe fn function<F: Copy>(&self, name: &str) -> Result<F, String> {
        assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
        let p = self.symbol(name)?;
        // SAFETY: the caller's contract; `F` is pointer-sized.
        Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }
}

/// The clock both sides are timed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// `CLOCK_THREAD_CPUTIME_ID`: the calling thread's CPU time.
    ThreadCpu,
    /// `CLOCK_MONOTONIC`: wall time.
    Wall,
}

impl Clock {
    pub fn from_env() -> Self {
        match std::env::var("LOCUS_BENCH_CLOCK").as_deref() {
            Ok("wall") => Clock::Wall,
            _ => Clock::ThreadCpu,
        }
    }

    pub fn id(self) -> libc::clockid_t {
        match self {
            Clock::ThreadCpu => libc::CLOCK_THREAD_CPUTIME_ID,
            Clock::Wall => libc::CLOCK_MONOTONIC,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Clock::ThreadCpu => "thread CPU time",
            Clock::Wall => "wall time",
        }
    }

    pub fn id_name(self) -> &'static str {
        match self {
            Clock::ThreadCpu => "CLOCK_THREAD_CPUTIME_ID",
            Clock::Wall => "CLOCK_MONOTONIC",
        }
    }

    /// Nanoseconds on this clock from an arbitrary origin.
    pub fn now(self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to write to.
        let rc = unsafe { libc::clock_gettime(self.id(), &mut ts) };
        assert_eq!(rc, 0, "clock_gettime({self:?}) failed");
        (ts.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ts.tv_nsec as u64)
    }

    /// Time since `start` (a value of [`Clock::now`]).
    pub fn since(self, start: u64) -> Duration {
        Duration::from_nanos(self.now().wrapping_sub(start))
    }
}
