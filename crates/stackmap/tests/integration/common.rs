//! Shared by the live tests: finding LLVM 19's tools, scratch directories, building a
//! fixture into a shared object, loading it, and reading its stack maps two ways (from the
//! file with the load bias, and from the relocated section in memory).

// Each test binary uses a different subset.
#![allow(dead_code)]
// The dlopen helpers need Unix; the live tests that use them also need x86-64 Linux.
#![cfg(unix)]

use std::ffi::{c_void, CStr, CString};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use locus_stackmap::object::find_section;
use locus_stackmap::{Arch, ParseOptions, RunTimeEndian, StackMapIndex, Tables};

pub type Index<'a> = StackMapIndex<'a, RunTimeEndian>;
// ---------------------------------------------------------------------------------------
// Tools, scratch space, building and loading the fixture
// ---------------------------------------------------------------------------------------

/// Finds an LLVM 19 tool by its versioned name on `PATH`, then in the Debian/Ubuntu
/// install directory.
pub fn llvm_tool(name: &str) -> Result<PathBuf, String> {
    let versioned = format!("{name}-19");
    let candidates = [
        PathBuf::from(&versioned),
        Path::new("/usr/lib/llvm-19/bin").join(name),
    ];
    for candidate in &candidates {
        let ok = Command::new(candidate)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if ok {
            return Ok(candidate.clone());
        }
    }
    Err(format!(
        "{versioned} not found (tried {candidates:?}): this test runs LLVM 19's tools; install \
         them with scripts/install-deps (Debian: apt-get install llvm-19 lld-19)"
    ))
}

/// A directory that is removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Result<Self, String> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "locus-stackmap-live-{}-{tag}-{n}",
            std::process::id()
        ));
        fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Runs a command; a failure carries its stderr.
pub fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| format!("{shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{shown} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// Compiles `tests/fixtures/<name>.ll` and links it into `<dir>/<name>.so`.
///
/// Link flags: `.llvm_stackmaps` is a read-only allocated section holding absolute
/// function addresses, so a shared object needs dynamic relocations in it (`-z notext`).
/// lld leaves 0 in the file for them (the address is in `.rela.dyn`, as a symbolic
/// `R_X86_64_64` for these global functions), so the file's section is only right after
/// `find_section` has applied those relocations: reading it through
/// [`StackMapSection::resolved`](locus_stackmap::object::StackMapSection::resolved) tests that.
pub fn build_shared(dir: &TempDir, name: &str) -> Result<PathBuf, String> {
    let llc = llvm_tool("llc")?;
    let lld = llvm_tool("ld.lld")?;
    let ll = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.ll"));
    let obj = dir.0.join(format!("{name}.o"));
    let so = dir.0.join(format!("{name}.so"));
    run(Command::new(llc)
        .args([
            "-mtriple=x86_64-linux-gnu",
            "-filetype=obj",
            "-relocation-model=pic",
        ])
        .arg(&ll)
        .arg("-o")
        .arg(&obj))?;
    run(Command::new(lld)
        .args(["-shared", "-z", "notext"])
        .arg(&obj)
        .arg("-o")
        .arg(&so))?;
    Ok(so)
}

/// A `dlopen`ed shared object. It is never closed: code and stack maps stay valid for
/// the rest of the process.
pub struct Loaded {
    pub handle: *mut c_void,
    /// The load bias: run-time address minus the address the file gives.
    pub bias: u64,
}

pub fn dlerror() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated message owned by libc.
    let message = unsafe { libc::dlerror() };
    if message.is_null() {
        String::from("(no dlerror message)")
    } else {
        // SAFETY: non-null, NUL-terminated, valid until the next dl* call on this thread.
        unsafe { CStr::from_ptr(message) }
            .to_string_lossy()
            .into_owned()
    }
}

impl Loaded {
    /// Loads `path`; `probe` is one of its symbols, to find its load bias by.
    pub fn open(path: &Path, probe: &str) -> Result<Loaded, String> {
        let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: a valid C string; the library has no initializers of its own.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(format!("dlopen {}: {}", path.display(), dlerror()));
        }
        let mut loaded = Loaded { handle, bias: 0 };
        let probe = loaded.symbol(probe)? as u64;
        loaded.bias = load_bias_of(probe)
            .ok_or_else(|| format!("no loaded object contains {probe:#x} (dl_iterate_phdr)"))?;
        Ok(loaded)
    }

    pub fn symbol(&self, name: &str) -> Result<*mut c_void, String> {
        let c_name = CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: a live handle and a valid C string.
        let p = unsafe { libc::dlsym(self.handle, c_name.as_ptr()) };
        if p.is_null() {
            Err(format!("dlsym {name}: {}", dlerror()))
        } else {
            Ok(p)
        }
    }
}

/// The load bias (`dlpi_addr`) of the loaded object one of whose `PT_LOAD` segments
/// contains `address`.
pub fn load_bias_of(address: u64) -> Option<u64> {
    struct Search {
        address: u64,
        found: Option<u64>,
    }
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info.
        let info = unsafe { &*info };
        // SAFETY: `data` is our `Search`, which nothing else uses during the iteration.
        let search = unsafe { &mut *data.cast::<Search>() };
        let phdrs: &[libc::Elf64_Phdr] = if info.dlpi_phdr.is_null() {
            &[]
        } else {
            // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        for ph in phdrs {
            let start = info.dlpi_addr.wrapping_add(ph.p_vaddr);
            if ph.p_type == libc::PT_LOAD && (start..start + ph.p_memsz).contains(&search.address) {
                search.found = Some(info.dlpi_addr);
                return 1;
            }
        }
        0
    }
    let mut search = Search {
        address,
        found: None,
    };
    // SAFETY: the callback only reads what it is given and writes `search`.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&raw mut search).cast()) };
    search.found
}

/// The stack maps of a loaded shared object, read from its file and from memory.
pub struct StackMaps {
    /// From the file, indexed with the load bias.
    pub file: Index<'static>,
    /// From the loaded (relocated) section, indexed with bias 0.
    pub memory: Index<'static>,
}

/// Reads and indexes the stack maps both ways and checks that the two agree.
pub fn stack_maps(so: &Path, loaded: &Loaded) -> Result<StackMaps, String> {
    let bytes: &'static [u8] = fs::read(so)
        .map_err(|e| format!("reading {}: {e}", so.display()))?
        .leak();
    let (info, section) = find_section(bytes).map_err(|e| e.to_string())?;
    if info.kind != object::ObjectKind::Dynamic {
        return Err(format!("{} is not a shared object: {info:?}", so.display()));
    }
    let section = section.ok_or("the shared object has no .llvm_stackmaps section")?;
    if section.arch != Some(Arch::X86_64) {
        return Err(format!("section arch {:?}, expected x86-64", section.arch));
    }
    let options = ParseOptions::default();
    let resolved: &'static [u8] = section.resolved().to_vec().leak();
    if section.relocated.is_none() {
        return Err(format!(
            "{}: expected dynamic relocations in .llvm_stackmaps",
            so.display()
        ));
    }
    let tables = Tables::new(resolved, section.endian, options)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("parsing the file's section: {e}"))?;
    let file = StackMapIndex::new(tables, loaded.bias);

    // The section is allocated (SHF_ALLOC), so the loader mapped it, and relocated the
    // function addresses in it.
    let at = loaded.bias.wrapping_add(section.address) as *const u8;
    // SAFETY: the section lies inside a PT_LOAD segment of the loaded object, which is
    // never unloaded; nothing writes it after relocation.
    let in_memory: &'static [u8] = unsafe { std::slice::from_raw_parts(at, section.data.len()) };
    let tables = Tables::new(in_memory, section.endian, options)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("parsing the loaded section: {e}"))?;
    let memory = StackMapIndex::new(tables, 0);

    if file.is_empty() || file.len() != memory.len() {
        return Err(format!(
            "file has {} records, memory {}",
            file.len(),
            memory.len()
        ));
    }
    for (f, m) in file.iter().zip(memory.iter()) {
        let same = f.address == m.address
            && f.function.address.wrapping_add(loaded.bias) == m.function.address
            && f.function.stack_size == m.function.stack_size
            && f.record.id() == m.record.id()
            && f.record.instruction_offset() == m.record.instruction_offset()
            && f.record.locations().eq(m.record.locations());
        if !same {
            return Err(format!("file and memory disagree:\n{f:#?}\n{m:#?}"));
        }
    }
    Ok(StackMaps { file, memory })
}
