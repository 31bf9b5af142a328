//! The inline cache of a patch point against a direct call (issue 17, section 6).
//!
//! Run with `cargo bench -p locus-jit --bench jit_ic` (x86-64 Linux, where the runtime
//! runs). One program, compiled by [`Runtime`]:
//!
//! - `@read(o)`: one patch point, `get(o, 10)`, reserving 16 bytes, first calling the miss
//!   handler; patched to call a stub (too small for a fast path inline);
//! - `@read_wide(o)`: the same read through a patch point reserving 48 bytes, which gets
//!   the fast path written inline (`Options::inline_fast_path`: 37 bytes, 41 counting hits);
//! - `@read_poly(o)`, `@read_mega(o)`: the same read through 16-byte patch points that
//!   see 4 and 5 shapes;
//! - `@read_direct(o)`: the anchor, the same read without a patch point: it loads the
//!   property's slot (word 1 of an object of the bench's shape) directly;
//! - `@read_via_call(o)`: a direct call of a `noinline` function that loads the slot, i.e.
//!   the call depth of a hit (the site calls the stub) without the inline cache; shown for
//!   reference, no goal.
//!
//! It times, `RUNS` rounds of `CALLS` calls each, on the thread's CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`; `LOCUS_BENCH_CLOCK=wall` for `CLOCK_MONOTONIC`):
//!
//! 1. from a Rust loop, through the function's address: `@read` once its site is patched
//!    (a **hit**: the site calls the stub, which checks the object and its shape, counts
//!    the hit and loads the slot), `@read_wide` (a hit in the inline fast path),
//!    `@read_direct` and `@read_via_call`; each hit with hits counted (`Stats::hits`) and
//!    with counting off (`Options::count_hits`), two runtimes. Only a hit can be called this way: a
//!    miss needs the runtime that `Runtime::call` makes active;
//! 2. through `Runtime::call` (the runtime's entry, which every call of compiled code takes):
//!    the same three, and `@read` of a runtime built with caching off (a **miss**: every
//!    read goes through the miss handler, which answers it from the object's shape);
//! 3. patching one site: the patch writer alone (`patch_call` over the site's 16 reserved
//!    bytes, to the same stub: make the page writable, write, make it executable again), and
//!    the runtime's whole cycle, `change_shape` (which patches the site back to the miss
//!    handler) then the re-miss (which encodes a stub for the shape into the runtime's
//!    stub memory and patches the site to it);
//! 4. making a stub for a new shape: `Runtime::specialize` of a site on one shape, then
//!    another (each a new stub, encoded into the block the previous one freed, and the
//!    site patched), against compiling the same stub as an LLVM module with its own
//!    `StackMapJit`, as the runtime did before (goal: at most 5 us; issue 28 §5), and
//!    `encode_stub` alone;
//! 5. `@read_poly`, a stub of 4 cases, hit on the last (goal <= 1.5x the monomorphic stub
//!    hit), and `@read_mega`, a site that saw 5 shapes (more than `Options::max_shapes`)
//!    and calls the runtime's lookup, through `Runtime::call` less a direct read through
//!    it (goal <= 50 ns).
//!
//! It prints medians and ranges and the ratios: hit/direct (goal <= 1.1x), miss/direct,
//! the patch and stub creation times, polymorphic/monomorphic and the megamorphic read. `LOCUS_BENCH_RUNS` sets the rounds (default 11).

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    bench::main()
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn main() {
    eprintln!("jit_ic: the JIT runtime runs on x86-64 Linux only; nothing to measure here");
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod bench {
    use std::hint::black_box;

    use locus_jit::{encode_stub, ObjectIndex, Options, Runtime, ShapeId};
    use locus_llvm::jit_stackmaps::StackMapJit;
    use locus_stackmap::patch::{encode_call, patch_call, Arch};

    const PROGRAM: &str = r#"
declare i64 @llvm.experimental.patchpoint.i64(i64, i32, ptr, i32, ...)
declare i64 @locus_ic_miss(ptr, i64)

define i64 @read(ptr %o) {
  %x = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 1, i32 16, ptr @locus_ic_miss, i32 2, ptr %o, i64 10)
  ret i64 %x
}

define i64 @read_wide(ptr %o) {
  %x = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 2, i32 48, ptr @locus_ic_miss, i32 2, ptr %o, i64 10)
  ret i64 %x
}

define i64 @read_poly(ptr %o) {
  %x = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 3, i32 16, ptr @locus_ic_miss, i32 2, ptr %o, i64 10)
  ret i64 %x
}

define i64 @read_mega(ptr %o) {
  %x = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 4, i32 16, ptr @locus_ic_miss, i32 2, ptr %o, i64 10)
  ret i64 %x
}

define i64 @read_direct(ptr %o) {
  %p = getelementptr i64, ptr %o, i64 1
  %v = load i64, ptr %p, align 8
  ret i64 %v
}

define i64 @load_slot(ptr %o) noinline {
  %p = getelementptr i64, ptr %o, i64 1
  %v = load i64, ptr %p, align 8
  ret i64 %v
}

define i64 @read_via_call(ptr %o) {
  %v = call i64 @load_slot(ptr %o)
  ret i64 %v
}
"#;

    /// The property `@read` reads, first in the bench's shape.
    const NAME: u64 = 10;
    const VALUE: i64 = 42;
    /// The patch point's ID and reserved bytes.
    const SITE: u64 = 1;
    const RESERVED: usize = 16;
    /// `@read_wide`'s patch point.
    const WIDE_SITE: u64 = 2;
    const WIDE_RESERVED: usize = 48;

    const CALLS: u64 = 2_000_000;
    const RUNTIME_CALLS: u64 = 200_000;
    const MISS_CALLS: u64 = 100_000;
    const PATCHES: u64 = 2_000;
    const CYCLES: u64 = 20;
    const LLVM_STUBS: u64 = 5;
    const NEW_STUBS: u64 = 2_000;

    #[derive(Clone, Copy)]
    enum Clock {
        ThreadCpu,
        Wall,
    }

    impl Clock {
        fn now(self) -> u64 {
            let id = match self {
                Clock::ThreadCpu => libc::CLOCK_THREAD_CPUTIME_ID,
                Clock::Wall => libc::CLOCK_MONOTONIC,
            };
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid timespec to write to.
            let rc = unsafe { libc::clock_gettime(id, &mut ts) };
            assert_eq!(rc, 0, "clock_gettime failed");
            (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
        }

        /// Nanoseconds per iteration of `f` run `n` times.
        fn per(self, n: u64, mut f: impl FnMut()) -> f64 {
            let start = self.now();
            for _ in 0..n {
                f();
            }
            (self.now() - start) as f64 / n as f64
        }
    }

    /// Median, minimum and maximum.
    fn stats(xs: &[f64]) -> (f64, f64, f64) {
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let m = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        (m, v[0], v[n - 1])
    }

    fn show(xs: &[f64], unit: &str) -> String {
        let (m, lo, hi) = stats(xs);
        format!("{m:.2} {unit} [{lo:.2}, {hi:.2}]")
    }

    fn ratio(what: &str, a: &[f64], b: &[f64], goal: Option<f64>) {
        let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
        let (m, lo, hi) = stats(&r);
        match goal {
            Some(g) => println!(
                "  {what}: {m:.2}x [{lo:.2}, {hi:.2}] (goal <= {g}x: {})",
                if m <= g { "met" } else { "MISSED" }
            ),
            None => println!("  {what}: {m:.2}x [{lo:.2}, {hi:.2}] (no goal)"),
        }
    }

    type ReadFn = unsafe extern "C" fn(u64) -> i64;

    /// The stub for `cases` as the runtime built it before stubs were encoded directly:
    /// an LLVM module (the same object check, a `switch` on the shape, a `musttail` call of
    /// the miss handler), compiled by its own `StackMapJit`. Kept here to time against.
    fn llvm_stub_ir(cases: &[(u64, usize)], index: ObjectIndex) -> String {
        let ObjectIndex { base, mask } = index;
        let hits = base.wrapping_sub(8);
        let mut ir = format!(
            "declare i64 @locus_ic_miss(ptr, i64)\n\n\
             define i64 @stub(ptr %obj, i64 %name) {{\n\
             entry:\n  %address = ptrtoint ptr %obj to i64\n  \
             %offset = and i64 %address, {mask}\n  \
             %word = getelementptr i8, ptr inttoptr (i64 {base} to ptr), i64 %offset\n  \
             %indexed = load i64, ptr %word, align 8\n  \
             %known = icmp eq i64 %indexed, %address\n  \
             br i1 %known, label %object, label %miss\n\
             object:\n  %shape = load i64, ptr %obj, align 8\n  switch i64 %shape, label %miss ["
        );
        for (i, (shape, _)) in cases.iter().enumerate() {
            ir += &format!("\n    i64 {shape}, label %case{i}");
        }
        ir += "\n  ]\n";
        for (i, (_, slot)) in cases.iter().enumerate() {
            ir += &format!(
                "case{i}:\n  %h{i} = load atomic i64, ptr inttoptr (i64 {hits} to ptr) monotonic, align 8\n  \
                 %n{i} = add i64 %h{i}, 1\n  \
                 store atomic i64 %n{i}, ptr inttoptr (i64 {hits} to ptr) monotonic, align 8\n  \
                 %p{i} = getelementptr i64, ptr %obj, i64 {word}\n  \
                 %v{i} = load i64, ptr %p{i}, align 8\n  ret i64 %v{i}\n",
                word = slot + 1
            );
        }
        ir += "miss:\n  %r = musttail call i64 @locus_ic_miss(ptr %obj, i64 %name)\n  ret i64 %r\n}\n";
        ir
    }

    /// A language's own objects for the bench: shape word 0, `NAME` in word 1, objects
    /// the bench made (`Runtime::with_model`: no object check in the compiled code).
    struct Plain {
        objects: std::collections::HashSet<u64>,
    }

    impl locus_jit::ObjectModel for Plain {
        fn shape_offset(&self) -> i32 {
            0
        }

        fn shape_of(&self, object: u64) -> Result<u64, String> {
            if !self.objects.contains(&object) {
                return Err(format!("{object:#x} is not an object"));
            }
            // SAFETY: an object the bench made (leaked, 3 words).
            Ok(unsafe { (object as *const u64).read() })
        }

        fn resolve(&self, _shape: u64, name: u64) -> Result<locus_jit::Resolution, String> {
            if name == NAME {
                Ok(locus_jit::Resolution::Slot(8))
            } else {
                Err(format!("no property {name}"))
            }
        }

        fn read(&self, object: u64, _shape: u64, _name: u64) -> Result<i64, String> {
            // SAFETY: as in `shape_of`, which the runtime called first.
            Ok(unsafe { ((object + 8) as *const i64).read() })
        }
    }

    /// Shapes with `NAME` in slot 0, 1, 2, ... (`n` of them), and an object of each whose
    /// `NAME` is `VALUE`.
    fn shapes_with_name_moving(
        rt: &Runtime,
        n: usize,
    ) -> Result<Vec<(ShapeId, u64)>, Box<dyn std::error::Error>> {
        (0..n)
            .map(|slot| {
                let mut names: Vec<u64> = (0..n as u64).map(|k| 100 + k).collect();
                names[slot] = NAME;
                let shape = rt.add_shape(&names);
                let values: Vec<i64> = names
                    .iter()
                    .map(|p| if *p == NAME { VALUE } else { 0 })
                    .collect();
                Ok((shape, rt.new_object(shape, &values)?))
            })
            .collect()
    }

    fn function(rt: &Runtime, name: &str) -> ReadFn {
        let address = rt
            .jit()
            .function_address(name)
            .unwrap_or_else(|| panic!("no {name}"));
        // SAFETY: the program defines `name` as `i64 (ptr)` with the C calling convention.
        unsafe { std::mem::transmute::<u64, ReadFn>(address) }
    }

    /// Calls `f` on `object` from a Rust loop, `n` times: nanoseconds per call.
    ///
    /// `f` must not enter the runtime (a patched site hitting its stub, or no patch point):
    /// outside `Runtime::call` the miss handler has no runtime and aborts.
    fn loop_calls(clock: Clock, f: ReadFn, object: u64, n: u64) -> f64 {
        let mut acc = 0i64;
        let ns = clock.per(n, || {
            // SAFETY: `f` reads word 1 of `object`, a live object of the bench's shape,
            // through a site already patched for it, or without a patch point.
            acc = acc.wrapping_add(unsafe { f(black_box(object)) });
        });
        assert_eq!(acc, VALUE.wrapping_mul(n as i64));
        ns
    }

    fn rt_calls(clock: Clock, rt: &Runtime, name: &str, object: u64, n: u64) -> f64 {
        clock.per(n, || {
            // SAFETY: every function of the program takes one object pointer of this
            // runtime.
            let v = unsafe { rt.call(name, &[black_box(object)]) };
            assert_eq!(v.ok(), Some(VALUE));
        })
    }

    pub fn main() -> Result<(), Box<dyn std::error::Error>> {
        let clock = match std::env::var("LOCUS_BENCH_CLOCK").as_deref() {
            Ok("wall") => Clock::Wall,
            _ => Clock::ThreadCpu,
        };
        let runs: usize = std::env::var("LOCUS_BENCH_RUNS")
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(11);

        let rt = Runtime::new("jit_ic.ll", PROGRAM, true)?;
        let shape = rt.add_shape(&[NAME, 20]);
        let object = rt.new_object(shape, &[VALUE, 7])?;
        let off = Runtime::new("jit_ic.ll", PROGRAM, false)?;
        let off_shape = off.add_shape(&[NAME, 20]);
        let off_object = off.new_object(off_shape, &[VALUE, 7])?;

        // The first call misses and patches the site to the stub for the shape.
        // SAFETY: `@read` takes one object pointer of this runtime.
        assert_eq!(unsafe { rt.call("read", &[object]) }.ok(), Some(VALUE));
        let site = rt
            .site_address(SITE)
            .ok_or("no record for the patch point")?;
        let patched = rt
            .code_bytes(site, RESERVED)
            .ok_or("the site is not in the code")?;
        let stub = u64::from_le_bytes(patched[2..10].try_into()?);
        assert_eq!(
            encode_call(Arch::X86_64, stub, RESERVED).ok(),
            Some(patched.clone()),
            "the site is not a call of its stub"
        );

        // The same program with hits not counted; both get `@read_wide`'s fast path inline.
        let uncounted = Runtime::with_options(
            "jit_ic.ll",
            PROGRAM,
            Options {
                count_hits: false,
                ..Options::default()
            },
        )?;
        let u_shape = uncounted.add_shape(&[NAME, 20]);
        let u_object = uncounted.new_object(u_shape, &[VALUE, 7])?;
        for (r, o) in [(&rt, object), (&uncounted, u_object)] {
            for f in ["read", "read_wide"] {
                // SAFETY: both functions take one object pointer of this runtime.
                assert_eq!(unsafe { r.call(f, &[o]) }.ok(), Some(VALUE));
            }
            let wide = r
                .site_address(WIDE_SITE)
                .and_then(|a| r.code_bytes(a, WIDE_RESERVED))
                .ok_or("no wide site")?;
            let path = locus_jit::encode_fast_path(
                &[(0, 0)],
                r.object_index(),
                r.options().count_hits,
                WIDE_RESERVED,
            );
            assert_eq!(Some(wide), path.map(|p| p.bytes), "no inline fast path");
        }
        // The runtime whose `@read` is patched back and re-missed (its `@read_wide` never
        // runs, so a shape change patches back one site).
        let cycle_rt = Runtime::new("jit_ic.ll", PROGRAM, true)?;
        let cycle_shape = cycle_rt.add_shape(&[NAME, 20]);
        let cycle_object = cycle_rt.new_object(cycle_shape, &[VALUE, 7])?;
        // SAFETY: `@read` takes one object pointer of this runtime.
        let first = unsafe { cycle_rt.call("read", &[cycle_object]) };
        assert_eq!(first.ok(), Some(VALUE));
        // A polymorphic site: `@read_poly` sees 4 shapes (the property in slot 0 to 3), a
        // stub of 4 cases; the hit timed is the last case's. A megamorphic one: `@read_mega`
        // sees 5, more than `Options::max_shapes`, and calls the runtime's lookup.
        let poly = shapes_with_name_moving(&uncounted, 4)?;
        for (_, o) in &poly {
            // SAFETY: `@read_poly` takes one object pointer of this runtime.
            let v = unsafe { uncounted.call("read_poly", &[*o]) };
            assert_eq!(v.ok(), Some(VALUE));
        }
        let poly_object = poly.last().map(|p| p.1).ok_or("no shapes")?;
        let mega = shapes_with_name_moving(&uncounted, 5)?;
        for (_, o) in &mega {
            // SAFETY: `@read_mega` takes one object pointer of this runtime.
            let v = unsafe { uncounted.call("read_mega", &[*o]) };
            assert_eq!(v.ok(), Some(VALUE));
        }
        let mega_site = uncounted.site_address(4).ok_or("no site 4")?;
        assert!(uncounted.is_megamorphic(mega_site));
        // The property in slot 0: `@read_direct` reads it too.
        let mega_object = mega[0].1;
        let u_poly = function(&uncounted, "read_poly");

        // Stub creation: the runtime's (a site specialized on one shape, then another: each
        // time a new stub, encoded into the block the last one freed, and the site patched
        // to it) against compiling the same stub as an LLVM module, the way it was made.
        let stub_rt = Runtime::with_options(
            "jit_ic.ll",
            PROGRAM,
            Options {
                inline_fast_path: false,
                ..Options::default()
            },
        )?;
        let stub_shapes = shapes_with_name_moving(&stub_rt, 2)?;
        let stub_cases = [(stub_shapes[0].0 .0, 0usize)];
        let stub_index = stub_rt.object_index();

        // Concurrent patching: `@read_wide`'s fast path is a body after its call form,
        // reached by a `jmp` that replaces the `movabs`. Made before the language's
        // runtime: the body (48 - 15 bytes) fits only the short form, whose index must be
        // below 2 GiB, where there is room for about six.
        let conc_rt = Runtime::with_options(
            "jit_ic.ll",
            PROGRAM,
            Options {
                count_hits: false,
                concurrent_patching: true,
                ..Options::default()
            },
        )?;
        let c_shape = conc_rt.add_shape(&[NAME, 20]);
        let c_object = conc_rt.new_object(c_shape, &[VALUE, 7])?;
        // SAFETY: `@read_wide` takes one object pointer of this runtime.
        let first = unsafe { conc_rt.call("read_wide", &[c_object]) };
        assert_eq!(first.ok(), Some(VALUE));
        let c_site = conc_rt.site_address(WIDE_SITE).ok_or("no wide site")?;
        assert_eq!(conc_rt.code_bytes(c_site, 2), Some(vec![0xeb, 0x0d]));
        let c_read_wide = function(&conc_rt, "read_wide");
        // A language's own objects: the fast path and stub without the object check.
        let plain_object =
            Box::leak(vec![0u64, VALUE as u64, 7].into_boxed_slice()).as_ptr() as u64;
        let plain_rt = Runtime::with_model(
            "jit_ic.ll",
            PROGRAM,
            Options {
                count_hits: false,
                ..Options::default()
            },
            std::sync::Arc::new(Plain {
                objects: [plain_object].into_iter().collect(),
            }),
        )?;
        for f in ["read", "read_wide"] {
            // SAFETY: both functions take one object pointer of the model.
            let v = unsafe { plain_rt.call(f, &[plain_object]) };
            assert_eq!(v.ok(), Some(VALUE));
        }
        let p_read = function(&plain_rt, "read");
        let p_read_wide = function(&plain_rt, "read_wide");

        let before = rt.stats();

        let read = function(&rt, "read");
        let read_wide = function(&rt, "read_wide");
        let u_read = function(&uncounted, "read");
        let u_read_wide = function(&uncounted, "read_wide");
        let direct = function(&rt, "read_direct");
        let via_call = function(&rt, "read_via_call");
        // Warm up.
        loop_calls(clock, read, object, CALLS / 10);
        loop_calls(clock, read_wide, object, CALLS / 10);
        loop_calls(clock, u_read, u_object, CALLS / 10);
        loop_calls(clock, u_read_wide, u_object, CALLS / 10);
        loop_calls(clock, direct, object, CALLS / 10);

        let (mut hit, mut dir, mut via) = (Vec::new(), Vec::new(), Vec::new());
        let (mut hit_inline, mut u_hit, mut u_hit_inline) = (Vec::new(), Vec::new(), Vec::new());
        let (mut rt_hit, mut rt_dir, mut rt_via, mut rt_miss) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut patch_ns, mut cycle_us) = (Vec::new(), Vec::new());
        let (mut u_poly_hit, mut rt_mega, mut rt_u_dir) = (Vec::new(), Vec::new(), Vec::new());
        let (mut llvm_stub_us, mut new_stub_us, mut encode_ns) =
            (Vec::new(), Vec::new(), Vec::new());
        let miss_symbol = [("locus_ic_miss", Runtime::miss_handler_address() as usize)];
        loop_calls(clock, u_poly, poly_object, CALLS / 10);
        let mut k = 0usize;
        let (mut p_hit, mut p_hit_inline) = (Vec::new(), Vec::new());
        let mut c_hit_inline = Vec::new();
        loop_calls(clock, c_read_wide, c_object, CALLS / 10);
        loop_calls(clock, p_read_wide, plain_object, CALLS / 10);
        for _ in 0..runs {
            p_hit.push(loop_calls(clock, p_read, plain_object, CALLS));
            p_hit_inline.push(loop_calls(clock, p_read_wide, plain_object, CALLS));
            c_hit_inline.push(loop_calls(clock, c_read_wide, c_object, CALLS));
            u_poly_hit.push(loop_calls(clock, u_poly, poly_object, CALLS));
            rt_mega.push(rt_calls(
                clock,
                &uncounted,
                "read_mega",
                mega_object,
                RUNTIME_CALLS,
            ));
            rt_u_dir.push(rt_calls(
                clock,
                &uncounted,
                "read_direct",
                mega_object,
                RUNTIME_CALLS,
            ));
            llvm_stub_us.push(
                clock.per(LLVM_STUBS, || {
                    let jit = StackMapJit::new(
                        "locus.ic.stub",
                        llvm_stub_ir(&stub_cases, stub_index),
                        &miss_symbol,
                    );
                    assert!(jit.is_ok_and(|j| j.function_address("stub").is_some()));
                }) / 1e3,
            );
            new_stub_us.push(
                clock.per(NEW_STUBS, || {
                    k += 1;
                    let shape = stub_shapes[k % 2].0;
                    assert!(stub_rt.specialize(SITE, NAME, &[shape]).is_ok());
                }) / 1e3,
            );
            encode_ns.push(clock.per(NEW_STUBS, || {
                assert!(black_box(encode_stub(black_box(&stub_cases), stub_index, true)).is_some());
            }));
            hit.push(loop_calls(clock, read, object, CALLS));
            hit_inline.push(loop_calls(clock, read_wide, object, CALLS));
            u_hit.push(loop_calls(clock, u_read, u_object, CALLS));
            u_hit_inline.push(loop_calls(clock, u_read_wide, u_object, CALLS));
            dir.push(loop_calls(clock, direct, object, CALLS));
            via.push(loop_calls(clock, via_call, object, CALLS));

            rt_hit.push(rt_calls(clock, &rt, "read", object, RUNTIME_CALLS));
            rt_dir.push(rt_calls(clock, &rt, "read_direct", object, RUNTIME_CALLS));
            rt_via.push(rt_calls(clock, &rt, "read_via_call", object, RUNTIME_CALLS));
            rt_miss.push(rt_calls(clock, &off, "read", off_object, MISS_CALLS));

            // The patch writer alone: the site rewritten to the same stub.
            patch_ns.push(clock.per(PATCHES, || {
                // SAFETY: `site` is the patch point of `@read` with its 16 reserved bytes,
                // in this runtime's code; no compiled code runs meanwhile (this thread is
                // the only one that calls it, and it is here); the stub takes the patch
                // point's arguments.
                let r = unsafe { patch_call(Arch::X86_64, site as *mut u8, RESERVED, stub) };
                assert!(r.is_ok());
            }));

            // The runtime's cycle: patched back by a shape change, re-missed, re-patched.
            cycle_us.push(
                clock.per(CYCLES, || {
                    assert_eq!(
                        cycle_rt.change_shape(cycle_shape, &[NAME, 20]).ok(),
                        Some(1)
                    );
                    // SAFETY: as above.
                    let v = unsafe { cycle_rt.call("read", &[cycle_object]) };
                    assert_eq!(v.ok(), Some(VALUE));
                }) / 1e3,
            );
        }
        // The runtime's stubs counted every hit, and nothing missed but the re-misses.
        let after = rt.stats();
        assert_eq!(after.misses, before.misses);
        let cycles = CYCLES * runs as u64;
        assert_eq!(cycle_rt.stats().misses, 1 + cycles);
        let hits = after.hits - before.hits;
        assert_eq!(
            hits,
            2 * (CALLS / 10) + (2 * CALLS + RUNTIME_CALLS) * runs as u64
        );
        // Not counted: no hits, and nothing missed but the first reads (2, 4 at the
        // polymorphic site, 5 at the megamorphic one); the megamorphic reads after them were lookups.
        assert_eq!(uncounted.stats().hits, 0);
        assert_eq!(uncounted.stats().misses, 2 + 4 + 5);
        assert_eq!(uncounted.stats().lookups, RUNTIME_CALLS * runs as u64);
        // Each specialization made one stub, in the memory the previous one freed.
        assert_eq!(stub_rt.stats().stubs, NEW_STUBS * runs as u64);
        assert_eq!(stub_rt.stub_memory().0, 64);

        println!(
            "summary: jit_ic, get(o, 10) through a 16-byte patch point in @read (stub) and a \
             48-byte one in @read_wide (fast path inline); {runs} rounds, median \
             [min, max]; clock: {}",
            match clock {
                Clock::ThreadCpu => "thread CPU time (CLOCK_THREAD_CPUTIME_ID)",
                Clock::Wall => "wall time (CLOCK_MONOTONIC)",
            }
        );
        println!("called from a Rust loop through the function's address ({CALLS} calls a round):");
        println!("  hits counted (Stats::hits):");
        println!("  hit, stub (16-byte site -> stub):   {}", show(&hit, "ns"));
        println!(
            "  hit, inline (48-byte site):         {}",
            show(&hit_inline, "ns")
        );
        println!("  hits not counted (Options::count_hits false):");
        println!(
            "  hit, stub:                          {}",
            show(&u_hit, "ns")
        );
        println!(
            "  hit, inline:                        {}",
            show(&u_hit_inline, "ns")
        );
        println!("  direct (@read_direct, the anchor):  {}", show(&dir, "ns"));
        println!("  direct call of a noinline getter:   {}", show(&via, "ns"));
        ratio("hit / direct, stub, counted", &hit, &dir, Some(1.1));
        ratio(
            "hit / direct, inline, counted",
            &hit_inline,
            &dir,
            Some(1.1),
        );
        ratio("hit / direct, stub, not counted", &u_hit, &dir, Some(1.1));
        ratio(
            "hit / direct, inline, not counted",
            &u_hit_inline,
            &dir,
            Some(1.1),
        );
        ratio(
            "hit / direct call of a getter, stub, counted",
            &hit,
            &via,
            None,
        );
        ratio(
            "hit / direct call of a getter, inline, not counted",
            &u_hit_inline,
            &via,
            None,
        );
        println!(
            "called through Runtime::call ({RUNTIME_CALLS} calls a round, {MISS_CALLS} for the miss):"
        );
        println!(
            "  hit (stub, counted):                {}",
            show(&rt_hit, "ns")
        );
        println!(
            "  direct:                             {}",
            show(&rt_dir, "ns")
        );
        println!(
            "  direct call of a noinline getter:   {}",
            show(&rt_via, "ns")
        );
        println!(
            "  miss (caching off: miss handler):   {}",
            show(&rt_miss, "ns")
        );
        ratio("hit / direct", &rt_hit, &rt_dir, Some(1.1));
        ratio("miss / direct", &rt_miss, &rt_dir, None);
        ratio(
            "miss (through Runtime::call) / direct (from the Rust loop)",
            &rt_miss,
            &dir,
            None,
        );
        println!("patching one site:");
        println!(
            "  patch writer alone (patch_call, 16 bytes, W^X): {} ({PATCHES} a round)",
            show(&patch_ns, "ns")
        );
        println!(
            "  change_shape + re-miss (a new stub encoded) + re-patch: {} ({CYCLES} a round)",
            show(&cycle_us, "us")
        );
        println!("stub creation for a new shape:");
        println!(
            "  compiled as an LLVM module (StackMapJit, as before): {} ({LLVM_STUBS} a round)",
            show(&llvm_stub_us, "us")
        );
        println!(
            "  encoded into stub memory + site patched (specialize): {} ({NEW_STUBS} a round)",
            show(&new_stub_us, "us")
        );
        println!(
            "  encode_stub alone:                                    {}",
            show(&encode_ns, "ns")
        );
        ratio(
            "LLVM module / encoded + patched",
            &llvm_stub_us,
            &new_stub_us,
            None,
        );
        let (m, _, _) = stats(&new_stub_us);
        println!(
            "  encoded + patched: goal <= 5 us: {}",
            if m <= 5.0 { "met" } else { "MISSED" }
        );
        println!("a language's own objects (Runtime::with_model: no object check), not counted:");
        println!(
            "  hit, stub:                          {}",
            show(&p_hit, "ns")
        );
        println!(
            "  hit, inline:                        {}",
            show(&p_hit_inline, "ns")
        );
        ratio(
            "hit / direct, stub, no object check",
            &p_hit,
            &dir,
            Some(1.1),
        );
        ratio(
            "hit / direct, inline, no object check",
            &p_hit_inline,
            &dir,
            Some(1.1),
        );
        println!("concurrent patching (Options::concurrent_patching), not counted:");
        println!(
            "  hit, inline (jmp over the call form to the body): {}",
            show(&c_hit_inline, "ns")
        );
        ratio(
            "hit / direct, inline, concurrent layout",
            &c_hit_inline,
            &dir,
            Some(1.1),
        );
        println!("polymorphic and megamorphic reads (hits not counted):");
        println!(
            "  polymorphic hit, 4 shapes, last case (stub): {}",
            show(&u_poly_hit, "ns")
        );
        ratio(
            "polymorphic (4) / monomorphic hit, stub",
            &u_poly_hit,
            &u_hit,
            Some(1.5),
        );
        println!(
            "  megamorphic read through Runtime::call:     {}",
            show(&rt_mega, "ns")
        );
        println!(
            "  direct read through Runtime::call:          {}",
            show(&rt_u_dir, "ns")
        );
        let mega_cost: Vec<f64> = rt_mega.iter().zip(&rt_u_dir).map(|(m, d)| m - d).collect();
        let (m, lo, hi) = stats(&mega_cost);
        println!(
            "  megamorphic read, less the call: {m:.2} ns [{lo:.2}, {hi:.2}] (goal <= 50 ns: {})",
            if m <= 50.0 { "met" } else { "MISSED" }
        );
        Ok(())
    }
}
