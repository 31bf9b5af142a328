//! Compressed DWARF sections read without trusting their sizes, and relocatable objects
//! refused: objects built at test time with clang-19 (`-gz=zlib`, `-gz=zstd`), GNU objcopy
//! (`--compress-debug-sections=zlib-gnu`: `.zdebug_*`) and llvm-objcopy-19 (a section of
//! zeros that inflates past the limit), some with their compression header patched.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::process::Command;

use locus_dwarf::binary::{Binary, DEFAULT_MAX_SECTION_BYTES};
use object::{Object as _, ObjectSection as _, ObjectSymbol as _};

const SOURCE: &str = r#"
int g = 5;
__attribute__((noinline)) int f(int a, long k) {
  int b = a * 3 + g;
  long c = k ^ b;
  return b + (int)c;
}
int main(int argc, char **argv) { return f(argc, (long)argv); }
"#;

/// A private directory for one test, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let path = std::env::temp_dir().join(format!(
            "locus-dwarf-{name}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        std::fs::create_dir(&path).unwrap();
        Dir(path)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(program: &str, args: &[&std::ffi::OsStr]) {
    let status = Command::new(program).args(args).status().unwrap();
    assert!(status.success(), "{program} {args:?}");
}

fn clang(dir: &Dir, name: &str, flags: &[&str]) -> PathBuf {
    let src = dir.path("t.c");
    std::fs::write(&src, SOURCE).unwrap();
    let out = dir.path(name);
    let mut args: Vec<&std::ffi::OsStr> = flags.iter().map(|f| f.as_ref()).collect();
    args.extend([src.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    run("clang-19", &args);
    out
}

/// The file offset of `name`'s bytes and whether it is compressed (`SHF_COMPRESSED`).
fn section(data: &[u8], name: &str) -> (usize, bool) {
    let file = object::File::parse(data).unwrap();
    let s = file.section_by_name(name).unwrap();
    let compressed = matches!(s.flags(), object::SectionFlags::Elf { sh_flags }
        if sh_flags & u64::from(object::elf::SHF_COMPRESSED) != 0);
    (s.file_range().unwrap().0 as usize, compressed)
}

/// Every variable (printed) at each byte of `f`'s code.
fn variables_of_f(data: &[u8]) -> Vec<String> {
    let file = object::File::parse(data).unwrap();
    let f = file.symbols().find(|s| s.name() == Ok("f")).unwrap();
    let binary = Binary::parse(data).unwrap();
    (f.address()..f.address() + f.size())
        .map(|pc| format!("{:?}", binary.variables_at(pc).unwrap()))
        .collect()
}

/// Writes the Elf64_Chdr `ch_size` of the section at `offset` (`SHF_COMPRESSED`).
fn claim(data: &mut [u8], offset: usize, size: u64) {
    data[offset + 8..offset + 16].copy_from_slice(&size.to_le_bytes());
}

#[test]
fn compressed_sections_read_as_uncompressed() {
    let dir = Dir::new("gz");
    let plain = std::fs::read(clang(&dir, "plain", &["-g", "-O2", "-gz=none"])).unwrap();
    let expected = variables_of_f(&plain);
    let found = expected.iter().filter(|v| v.contains("name: \"")).count();
    assert!(found >= 10, "too few PCs with variables: {found}");
    for z in ["zlib", "zstd"] {
        let path = clang(&dir, z, &["-g", "-O2", &format!("-gz={z}")]);
        let data = std::fs::read(path).unwrap();
        assert!(
            section(&data, ".debug_info").1,
            "{z}: .debug_info not compressed"
        );
        assert_eq!(variables_of_f(&data), expected, "-gz={z}");
    }
    let gnu = dir.path("gnu");
    run(
        "objcopy",
        &[
            "--compress-debug-sections=zlib-gnu".as_ref(),
            dir.path("plain").as_os_str(),
            gnu.as_os_str(),
        ],
    );
    let data = std::fs::read(gnu).unwrap();
    assert!(object::File::parse(&*data)
        .unwrap()
        .section_by_name(".zdebug_info")
        .is_some());
    assert_eq!(variables_of_f(&data), expected, ".zdebug");
}

#[test]
fn a_header_claiming_a_terabyte_is_refused() {
    let dir = Dir::new("claim");
    for z in ["zlib", "zstd"] {
        let mut data = std::fs::read(clang(&dir, z, &["-g", "-O2", &format!("-gz={z}")])).unwrap();
        let (at, compressed) = section(&data, ".debug_info");
        assert!(compressed);
        claim(&mut data, at, 1 << 40);
        let err = Binary::parse(&data).err().unwrap().to_string();
        assert!(
            err.contains(".debug_info")
                && err.contains("claims 1099511627776 bytes")
                && err.contains(&DEFAULT_MAX_SECTION_BYTES.to_string()),
            "{z}: {err}"
        );
    }
}

#[test]
fn decompression_bombs_are_refused() {
    let dir = Dir::new("bomb");
    let plain = clang(&dir, "plain", &["-g", "-O2"]);
    let zeros = dir.path("zeros");
    std::fs::write(&zeros, vec![0u8; 4 << 20]).unwrap();
    let junk = format!(".debug_junk={}", zeros.display());
    let added = dir.path("added");
    run(
        "llvm-objcopy-19",
        &[
            "--add-section".as_ref(),
            junk.as_ref(),
            plain.as_os_str(),
            added.as_os_str(),
        ],
    );
    for z in ["zlib", "zstd"] {
        let bomb = dir.path(z);
        let flag = format!("--compress-debug-sections={z}");
        run(
            "llvm-objcopy-19",
            &[flag.as_ref(), added.as_os_str(), bomb.as_os_str()],
        );
        let mut data = std::fs::read(&bomb).unwrap();
        assert!(data.len() < 256 << 10, "{z}: {} bytes", data.len());
        let (at, compressed) = section(&data, ".debug_junk");
        assert!(compressed, "{z}");
        // Within the limit it reads; over it, refused by what the header claims.
        Binary::parse(&data).unwrap();
        let err = Binary::parse_bounded(&data, 1 << 20)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(".debug_junk") && err.contains("claims 4194304 bytes"),
            "{err}"
        );
        // A header that lies small: the stream is cut one byte past the claim.
        claim(&mut data, at, 4096);
        let err = Binary::parse_bounded(&data, 1 << 20)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("decompresses to more than 4096 bytes, but its header claims 4096"),
            "{z}: {err}"
        );
        // A header that claims more than its stream holds.
        claim(&mut data, at, 5 << 20);
        let err = Binary::parse(&data).err().unwrap().to_string();
        assert!(err.contains("decompresses to 4194304 bytes"), "{z}: {err}");
    }
}

/// Two sections each within the limit, together over it: the limit is on their sum.
#[test]
fn the_limit_bounds_all_sections_together() {
    let dir = Dir::new("sum");
    let plain = clang(&dir, "plain", &["-g", "-O2"]);
    let zeros = dir.path("zeros");
    std::fs::write(&zeros, vec![0u8; 4 << 20]).unwrap();
    let one = format!(".debug_junk={}", zeros.display());
    let two = format!(".debug_junk2={}", zeros.display());
    let added = dir.path("added");
    let bomb = dir.path("bomb");
    run(
        "llvm-objcopy-19",
        &[
            "--add-section".as_ref(),
            one.as_ref(),
            "--add-section".as_ref(),
            two.as_ref(),
            plain.as_os_str(),
            added.as_os_str(),
        ],
    );
    run(
        "llvm-objcopy-19",
        &[
            "--compress-debug-sections=zlib".as_ref(),
            added.as_os_str(),
            bomb.as_os_str(),
        ],
    );
    let data = std::fs::read(&bomb).unwrap();
    Binary::parse_bounded(&data, 9 << 20).unwrap();
    let err = Binary::parse_bounded(&data, 6 << 20)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("claims 4194304 bytes, more than the limit of 6291456")
            && err.contains("bytes other sections decompressed to"),
        "{err}"
    );
}

/// A relocatable object's DWARF, its relocations applied (every section at address 0), reads
/// as the linked program's at every byte of `f`, `f`'s offset in `.text` for its address;
/// llvm-dwarfdump-19 (which applies them too) names the same variables. Unrelocated, the
/// names (`DW_FORM_strx` through `.debug_str_offsets`) and ranges would all be offset 0's.
#[test]
fn a_relocatable_object_reads_as_linked() {
    let dir = Dir::new("reloc");
    for z in ["none", "zlib"] {
        let flag = format!("-gz={z}");
        let object_path = clang(&dir, "t.o", &["-g", "-O2", "-c", &flag]);
        let linked = dir.path("t");
        run(
            "clang-19",
            &[object_path.as_os_str(), "-o".as_ref(), linked.as_os_str()],
        );
        let object = std::fs::read(&object_path).unwrap();
        let linked = std::fs::read(&linked).unwrap();
        let at = |data: &[u8]| {
            let file = object::File::parse(data).unwrap();
            let f = file.symbols().find(|s| s.name() == Ok("f")).unwrap();
            (f.address(), f.size())
        };
        let ((start, size), (linked_start, _)) = (at(&object), at(&linked));
        let (in_object, in_linked) = (
            Binary::parse(&object).unwrap(),
            Binary::parse(&linked).unwrap(),
        );
        let mut names = std::collections::BTreeSet::new();
        for i in 0..size {
            let vars = in_object.variables_at(start + i).unwrap();
            assert_eq!(
                format!("{vars:?}"),
                format!("{:?}", in_linked.variables_at(linked_start + i).unwrap()),
                "{flag}: f+{i}"
            );
            names.extend(vars.into_iter().map(|v| v.name));
        }
        assert_eq!(names, dwarfdump_names(&object_path), "{flag}");
        assert_eq!(names.len(), 4, "{flag}");
    }
}

/// The variables llvm-dwarfdump-19 (relocations applied) shows under `f` in `path`.
fn dwarfdump_names(path: &std::path::Path) -> std::collections::BTreeSet<String> {
    let dump = Command::new("llvm-dwarfdump-19")
        .args(["--debug-info", "--name=f", "--show-children"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&dump.stdout)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("DW_AT_name\t(\""))
        .filter_map(|l| l.strip_suffix("\")"))
        .filter(|n| *n != "f")
        .map(str::to_owned)
        .collect()
}

/// An AArch64 object (`R_AARCH64_ABS32`/`ABS64` in its DWARF): at `f+4` the variables
/// llvm-dwarfdump-19 shows under `f`.
#[test]
fn an_aarch64_relocatable_object_reads() {
    let dir = Dir::new("reloc-a64");
    let path = clang(
        &dir,
        "t.o",
        &["-g", "-O2", "-c", "--target=aarch64-linux-gnu"],
    );
    let object = std::fs::read(&path).unwrap();
    let file = object::File::parse(&*object).unwrap();
    let f = file
        .symbols()
        .find(|s| s.name() == Ok("f"))
        .unwrap()
        .address();
    let vars = Binary::parse(&object).unwrap().variables_at(f + 4).unwrap();
    let names: std::collections::BTreeSet<String> = vars.into_iter().map(|v| v.name).collect();
    assert_eq!(names, dwarfdump_names(&path));
    assert_eq!(names.len(), 4);
}

#[test]
fn a_relocatable_object_with_several_code_sections_is_refused() {
    let dir = Dir::new("reloc-sections");
    let object = std::fs::read(clang(
        &dir,
        "t.o",
        &["-g", "-O2", "-c", "-ffunction-sections"],
    ))
    .unwrap();
    let err = Binary::parse(&object).err().unwrap().to_string();
    assert!(
        err.contains("relocatable object") && err.contains("link it first"),
        "{err}"
    );
}

/// Damaged compressed, relocatable objects: 3000 copies of a `-gz=zlib` and a `-gz=zstd`
/// `.o`, each with a few bytes changed (a fixed xorshift sequence), read and asked for
/// variables: an answer or an error, never a panic.
#[test]
fn damaged_compressed_relocatable_objects_never_panic() {
    let dir = Dir::new("damaged");
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for z in ["zlib", "zstd"] {
        let flag = format!("-gz={z}");
        let good = std::fs::read(clang(&dir, "t.o", &["-g", "-O2", "-c", &flag])).unwrap();
        for _ in 0..3000 {
            let mut bad = good.clone();
            for _ in 0..1 + next() % 4 {
                let at = (next() % bad.len() as u64) as usize;
                bad[at] = next() as u8;
            }
            if let Ok(binary) = Binary::parse_bounded(&bad, 1 << 20) {
                for pc in [0, 4, 8, 16] {
                    let _ = binary.variables_at(pc);
                }
            }
        }
    }
}
