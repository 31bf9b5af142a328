//! The inline cache of a patch point against a direct call (issue 17, section 6).
//!
//! Run with `cargo bench -p locus-llvm --bench jit_ic` (x86-64 Linux, where the runtime
//! runs). One program, compiled by [`Runtime`]:
//!
//! - `@read(o)`: one patch point, `get(o, 10)`, reserving 16 bytes, first calling the miss
//!   handler; patched to call a stub (too small for a fast path inline);
//! - `@read_wide(o)`: the same read through a patch point reserving 48 bytes, which gets
//!   the fast path written inline (`Options::inline_fast_path`: 37 bytes, 41 counting hits);
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
//!    handler) then the re-miss (which compiles a stub for the shape with LLVM and patches
//!    the site to it).
//!
//! It prints medians and ranges and the ratios: hit/direct (goal <= 1.1x), miss/direct and
//! the patch times. `LOCUS_BENCH_RUNS` sets the rounds (default 11).

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

    use locus_llvm::jit_runtime::{Options, Runtime};
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
            let path = locus_llvm::jit_runtime::encode_fast_path(
                &[(0, 0)],
                r.object_index(),
                r.options().count_hits,
                WIDE_RESERVED,
            );
            assert_eq!(Some(wide), path.map(|p| p.bytes), "no inline fast path");
        }
        assert_eq!(uncounted.stats().stubs, 1);
        // The runtime whose `@read` is patched back and re-missed (its `@read_wide` never
        // runs, so a shape change patches back one site).
        let cycle_rt = Runtime::new("jit_ic.ll", PROGRAM, true)?;
        let cycle_shape = cycle_rt.add_shape(&[NAME, 20]);
        let cycle_object = cycle_rt.new_object(cycle_shape, &[VALUE, 7])?;
        // SAFETY: `@read` takes one object pointer of this runtime.
        let first = unsafe { cycle_rt.call("read", &[cycle_object]) };
        assert_eq!(first.ok(), Some(VALUE));
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
        for _ in 0..runs {
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
        // Not counted: no hits, and nothing missed but the first reads.
        assert_eq!(uncounted.stats().hits, 0);
        assert_eq!(uncounted.stats().misses, 2);

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
            "  change_shape + re-miss (LLVM compiles the stub) + re-patch: {} ({CYCLES} a round)",
            show(&cycle_us, "us")
        );
        Ok(())
    }
}
