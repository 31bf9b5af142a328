//! The runtime that uses the JIT's stack maps, running for real: inline caches on patch
//! points (same answers with caching on and off, misses as a model of the caches predicts,
//! hits that never enter the runtime, sites patched twice and back), and deoptimization
//! through stack map shadows at several points (the interpreter's result equals the
//! compiled code's, from live values of every location kind).

#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

#[path = "../../signals/tests/support/fault_child.rs"]
mod fault_child;

use std::collections::{HashMap, HashSet};
use std::error::Error as StdError;

use locus_jit::{encode_fast_path, encode_stub, ObjectIndex, Options, Runtime, ShapeId, SiteKind};
use locus_stackmap::patch::{encode_call, Arch};

type TestResult = Result<(), Box<dyn StdError>>;

const X: u64 = 10;
const Y: u64 = 20;
const Z: u64 = 30;

/// Three functions reading properties through six patch points (IDs 1 to 6), one of them
/// reserving 24 bytes.
const IC_PROGRAM: &str = r#"
declare i64 @llvm.experimental.patchpoint.i64(i64, i32, ptr, i32, ...)
declare i64 @locus_ic_miss(ptr, i64)

define i64 @sum(ptr %o) {
  %x = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 1, i32 16, ptr @locus_ic_miss, i32 2, ptr %o, i64 10)
  %y = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 2, i32 16, ptr @locus_ic_miss, i32 2, ptr %o, i64 20)
  %s = add i64 %x, %y
  ret i64 %s
}

define i64 @weigh(ptr %o) section ".text.hot" {
  %z = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 3, i32 24, ptr @locus_ic_miss, i32 2, ptr %o, i64 30)
  %x = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 4, i32 16, ptr @locus_ic_miss, i32 2, ptr %o, i64 10)
  %t = mul i64 %z, 3
  %r = sub i64 %t, %x
  ret i64 %r
}

define i64 @cross(ptr %a, ptr %b) {
  %x = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 5, i32 16, ptr @locus_ic_miss, i32 2, ptr %a, i64 10)
  %y = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 6, i32 16, ptr @locus_ic_miss, i32 2, ptr %b, i64 20)
  %p = mul i64 %x, %y
  ret i64 %p
}
"#;

/// The reads each function makes: (site ID, which argument, property).
fn reads(function: &str) -> &'static [(u64, usize, u64)] {
    match function {
        "sum" => &[(1, 0, X), (2, 0, Y)],
        "weigh" => &[(3, 0, Z), (4, 0, X)],
        _ => &[(5, 0, X), (6, 1, Y)],
    }
}

/// What each function computes from the properties of its arguments.
fn expected(function: &str, values: &[HashMap<u64, i64>]) -> i64 {
    let v = |i: usize, name: u64| values[i][&name];
    match function {
        "sum" => v(0, X) + v(0, Y),
        "weigh" => 3 * v(0, Z) - v(0, X),
        _ => v(0, X) * v(1, Y),
    }
}

/// One step of the script: a call (function, object indices), or a shape change.
enum Step {
    Call(&'static str, &'static [usize]),
    Change(usize, [u64; 3]),
}

const ROUND: [Step; 9] = [
    Step::Call("sum", &[0]),
    Step::Call("sum", &[1]),
    Step::Call("weigh", &[0]),
    Step::Call("sum", &[2]),
    Step::Call("weigh", &[3]),
    Step::Call("cross", &[0, 2]),
    Step::Call("cross", &[2, 3]),
    Step::Call("sum", &[0]),
    Step::Call("sum", &[3]),
];

/// What a run of the script gave.
#[derive(Debug, PartialEq)]
struct Run {
    answers: Vec<i64>,
    misses: u64,
    hits: u64,
    reads: u64,
    /// Misses a model of per-site caches predicts: a (site, shape) pair misses unless the
    /// site saw the shape since the site was last patched back.
    model_misses: u64,
}

/// The shapes: three orders of x, y, z.
const SHAPES: [[u64; 3]; 3] = [[X, Y, Z], [Z, X, Y], [Y, Z, X]];

/// Objects: (shape index, values of x, y, z).
const OBJECTS: [(usize, [i64; 3]); 4] = [
    (0, [1, 2, 3]),
    (0, [-7, 11, 5]),
    (1, [100, 40, 9]),
    (2, [6, -3, 1000]),
];

fn run_script(caching: bool) -> Result<Run, Box<dyn StdError>> {
    run_script_with(
        IC_PROGRAM,
        Options {
            caching,
            ..Options::default()
        },
    )
}

/// Runs the script over the built-in shapes model as a language runs its own model: a
/// `Shapes` of the test's, given to `Runtime::with_model`, its objects made and its
/// layouts changed through it, the sites patched back by `Runtime::invalidate_shape`.
fn run_script_with(program: &str, options: Options) -> Result<Run, Box<dyn StdError>> {
    let caching = options.caching;
    let model = std::sync::Arc::new(locus_jit::Shapes::new()?);
    let rt = Runtime::with_model("ic.ll", program, options, model.clone())?;
    let shapes: Vec<ShapeId> = SHAPES.iter().map(|s| model.add_shape(s)).collect();
    let mut addresses = Vec::new();
    let mut values = Vec::new();
    let mut shape_of = Vec::new();
    for (shape, [x, y, z]) in OBJECTS {
        let by_name = HashMap::from([(X, x), (Y, y), (Z, z)]);
        let slots: Vec<i64> = SHAPES[shape].iter().map(|n| by_name[n]).collect();
        addresses.push(model.new_object(shapes[shape], &slots)?);
        values.push(by_name);
        shape_of.push(shape);
    }
    let shapes_model = model;
    let mut model: HashMap<u64, HashSet<usize>> = HashMap::new();
    let mut model_misses = 0;
    let mut reads_made = 0;
    let mut answers = Vec::new();
    let script = [
        Step::Change(1, [Y, X, Z]),
        Step::Change(0, [Z, Y, X]),
        Step::Change(2, [X, Y, Z]),
    ];
    for change in std::iter::once(None).chain(script.iter().map(Some)) {
        if let Some(Step::Change(shape, order)) = change {
            shapes_model.rearrange(shapes[*shape], order)?;
            let patched_back = rt.invalidate_shape(shapes[*shape].0)?;
            let sites_with_shape = model.values().filter(|s| s.contains(shape)).count();
            if caching {
                assert_eq!(patched_back, sites_with_shape);
            }
            model.retain(|_, seen| !seen.contains(shape));
        }
        for _ in 0..3 {
            for step in &ROUND {
                let Step::Call(function, objects) = step else {
                    continue;
                };
                let args: Vec<u64> = objects.iter().map(|i| addresses[*i]).collect();
                // SAFETY: the program's functions take one or two object pointers made by
                // this runtime.
                let answer = unsafe { rt.call(function, &args)? };
                let of: Vec<HashMap<u64, i64>> =
                    objects.iter().map(|i| values[*i].clone()).collect();
                assert_eq!(answer, expected(function, &of), "{function}{objects:?}");
                answers.push(answer);
                for (site, argument, _) in reads(function) {
                    reads_made += 1;
                    let shape = shape_of[objects[*argument]];
                    if model.entry(*site).or_default().insert(shape) {
                        model_misses += 1;
                    }
                }
            }
        }
    }
    let stats = rt.stats();
    Ok(Run {
        answers,
        misses: stats.misses,
        hits: stats.hits,
        reads: reads_made,
        model_misses,
    })
}

#[test]
fn the_inline_cache_program_gives_the_same_answers_with_caching_on_and_off() -> TestResult {
    let on = run_script(true)?;
    let off = run_script(false)?;
    assert_eq!(on.answers, off.answers);
    // Without caching every read enters the runtime.
    assert_eq!(off.misses, off.reads);
    assert_eq!(off.hits, 0);
    // With caching: one miss per distinct (site, shape) pair, plus re-misses after a
    // shape change patched sites back; every other read is a hit in a stub.
    assert_eq!(on.misses, on.model_misses);
    assert!(on.misses < on.reads / 3, "{on:?}");
    assert_eq!(on.hits + on.misses, on.reads);
    eprintln!(
        "reads {}, misses {} (model {}), hits {}",
        on.reads, on.misses, on.model_misses, on.hits
    );
    Ok(())
}

#[test]
fn later_calls_do_not_enter_the_runtime() -> TestResult {
    let rt = Runtime::new("ic.ll", IC_PROGRAM, true)?;
    let a = rt.add_shape(&[X, Y, Z]);
    let b = rt.add_shape(&[Y, X, Z]);
    let oa = rt.new_object(a, &[4, 5, 6])?;
    let ob = rt.new_object(b, &[50, 40, 60])?;
    // SAFETY: `@sum` takes an object of this runtime.
    let call = |o: u64| unsafe { rt.call("sum", &[o]) };
    assert_eq!(call(oa)?, 9);
    assert_eq!(call(ob)?, 90);
    let before = rt.stats();
    assert_eq!(before.misses, 4);
    for _ in 0..1000 {
        assert_eq!(call(oa)?, 9);
        assert_eq!(call(ob)?, 90);
    }
    let after = rt.stats();
    assert_eq!(after.misses, before.misses);
    assert_eq!(after.patches, before.patches);
    assert_eq!(after.hits - before.hits, 4000);
    // A stub per set of (shape, slot) cases: x and y are in different slots, so the two
    // sites share none (one for shape a alone, one for a and b, at each site).
    assert_eq!(after.stubs, 4);
    Ok(())
}

fn target_of(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[2..10]);
    u64::from_le_bytes(word)
}

#[test]
fn a_site_is_patched_twice_and_back() -> TestResult {
    let rt = Runtime::new("ic.ll", IC_PROGRAM, true)?;
    let a = rt.add_shape(&[X, Y, Z]);
    let b = rt.add_shape(&[Z, Y, X]);
    let oa = rt.new_object(a, &[1, 2, 3])?;
    let ob = rt.new_object(b, &[30, 20, 10])?;
    let miss = Runtime::miss_handler_address();
    for (id, reserved, function) in [(1u64, 16usize, "sum"), (3, 24, "weigh")] {
        let site = rt.site_address(id).ok_or("no site")?;
        assert_eq!(rt.sites()[&id].reserved, reserved);
        let original = rt.code_bytes(site, reserved).ok_or("no code")?;
        // LLVM's own patch point call to the miss handler, nop-padded.
        assert_eq!(original, encode_call(Arch::X86_64, miss, reserved)?);
        // SAFETY: the functions take an object of this runtime.
        let first = unsafe { rt.call(function, &[oa])? };
        let once = rt.code_bytes(site, reserved).ok_or("no code")?;
        let stub_a = target_of(&once);
        assert_ne!(stub_a, miss);
        assert_eq!(once, encode_call(Arch::X86_64, stub_a, reserved)?);
        // SAFETY: as above.
        let second = unsafe { rt.call(function, &[ob])? };
        let twice = rt.code_bytes(site, reserved).ok_or("no code")?;
        let stub_ab = target_of(&twice);
        assert!(stub_ab != stub_a && stub_ab != miss);
        assert_eq!(twice, encode_call(Arch::X86_64, stub_ab, reserved)?);
        assert_eq!((first, second), if id == 1 { (3, 30) } else { (8, 80) });
    }
    let patches = rt.stats().patches;
    // Changing shape b patches both sites (and site 2 and 4) back to the miss handler.
    assert_eq!(rt.change_shape(b, &[Y, Z, X])?, 4);
    assert_eq!(rt.stats().patches, patches + 4);
    for (id, reserved) in [(1u64, 16usize), (3, 24)] {
        let site = rt.site_address(id).ok_or("no site")?;
        let back = rt.code_bytes(site, reserved).ok_or("no code")?;
        assert_eq!(back, encode_call(Arch::X86_64, miss, reserved)?);
    }
    // SAFETY: as above.
    assert_eq!(unsafe { rt.call("sum", &[ob])? }, 30);
    // SAFETY: as above.
    assert_eq!(unsafe { rt.call("weigh", &[ob])? }, 80);
    Ok(())
}

#[test]
fn records_are_found_for_every_function_compiled() -> TestResult {
    let rt = Runtime::new("ic.ll", IC_PROGRAM, true)?;
    assert_eq!(rt.sites().len(), 6);
    for site in rt.sites().values() {
        assert_eq!(site.kind, SiteKind::PatchPoint);
        let record = rt
            .jit()
            .stack_maps()
            .by_id(site.id)
            .next()
            .ok_or_else(|| format!("no record {}", site.id))?;
        let function = rt
            .jit()
            .function_address(&site.function)
            .ok_or("no function")?;
        assert_eq!(record.function.address, function);
    }
    let rt = Runtime::new("deopt.ll", DEOPT_PROGRAM, true)?;
    for site in rt.sites().values() {
        let function = rt
            .jit()
            .function_address(&site.function)
            .ok_or("no function")?;
        assert!(rt
            .jit()
            .stack_maps()
            .by_id(site.id)
            .any(|r| r.function.address == function));
    }
    Ok(())
}

#[test]
fn a_missing_property_is_an_error_of_the_call() -> TestResult {
    let rt = Runtime::new("ic.ll", IC_PROGRAM, true)?;
    let a = rt.add_shape(&[X, Z]);
    let o = rt.new_object(a, &[1, 3])?;
    // SAFETY: `@sum` takes an object of this runtime.
    let err = unsafe { rt.call("sum", &[o]) }
        .err()
        .ok_or("expected an error")?;
    assert!(err.to_string().contains("no property 20"), "{err}");
    Ok(())
}

/// `@compute` with three deoptimization points, stack maps after `@locus_poll` with 8-byte
/// shadows; twelve values live across the calls force spills (Indirect), the alloca is
/// Direct, 17 is a Constant and 2^40 a ConstantIndex.
const DEOPT_PROGRAM: &str = r#"
declare void @llvm.experimental.stackmap(i64, i32, ...)
declare i64 @locus_poll(i64)

define i64 @compute(i64 %a, i64 %b) {
entry:
  %slot = alloca i64, align 8
  store i64 %b, ptr %slot
  %v0 = mul i64 %a, 3
  %v1 = add i64 %a, 11
  %v2 = xor i64 %a, 85
  %v3 = mul i64 %a, %a
  %v4 = sub i64 %b, %a
  %v5 = shl i64 %a, 3
  %v6 = add i64 %v0, %b
  %v7 = mul i64 %v1, 5
  %v8 = or i64 %b, 256
  %v9 = lshr i64 %b, 2
  %v10 = add i64 %v3, 7
  %v11 = mul i64 %v4, 13
  %p1 = call i64 @locus_poll(i64 %v0)
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 100, i32 8, ptr %slot, i64 %p1, i64 %v0, i64 %v1, i64 %v2, i64 %v3, i64 %v4, i64 %v5, i64 %v6, i64 %v7, i64 %v8, i64 %v9, i64 %v10, i64 %v11, i64 17, i64 1099511627776)
  %y = add i64 %p1, %v2
  %c = icmp sgt i64 %y, 50
  br i1 %c, label %big, label %small
big:
  %l = load i64, ptr %slot
  %y2 = mul i64 %y, %l
  br label %join
small:
  %y3 = sub i64 %y, 1000
  store i64 %y3, ptr %slot
  br label %join
join:
  %z = phi i64 [ %y2, %big ], [ %y3, %small ]
  %p2 = call i64 @locus_poll(i64 %z)
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 101, i32 8, ptr %slot, i64 %p2, i64 %v1, i64 %v3, i64 %v4, i64 %v5, i64 %v6, i64 %v7, i64 %v8, i64 %v9, i64 %v10, i64 %v11)
  %s1 = add i64 %p2, %v1
  %s2 = xor i64 %s1, %v3
  %s3 = add i64 %s2, %v4
  %s4 = sub i64 %s3, %v5
  %p3 = call i64 @locus_poll(i64 %s4)
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 102, i32 16, ptr %slot, i64 %p3, i64 %v6, i64 %v7, i64 %v8, i64 %v9, i64 %v10, i64 %v11)
  %t1 = add i64 %p3, %v6
  %t2 = mul i64 %t1, %v7
  %t3 = add i64 %t2, %v8
  %t4 = sub i64 %t3, %v9
  %t5 = xor i64 %t4, %v10
  %t6 = add i64 %t5, %v11
  %m = load i64, ptr %slot
  %t7 = add i64 %t6, %m
  %small.r = icmp slt i64 %t7, 0
  %r = select i1 %small.r, i64 %t7, i64 %t6
  ret i64 %r
}
"#;

const INPUTS: [(u64, u64); 4] = [(5, 9), (1, 2), (1 << 33, 77), (0, u64::MAX - 3)];

#[test]
fn deoptimization_at_several_points_gives_the_compiled_result() -> TestResult {
    let rt = Runtime::new("deopt.ll", DEOPT_PROGRAM, true)?;
    let mut deopts = 0;
    let mut checked = 0;
    for (a, b) in INPUTS {
        // SAFETY: `@compute` is `i64 (i64, i64)`.
        let compiled = unsafe { rt.call("compute", &[a, b])? };
        assert_eq!(rt.stats().deopts, deopts);
        for point in 1..=3 {
            rt.invalidate_at_poll("compute", point);
            // SAFETY: as above.
            let result = unsafe { rt.call("compute", &[a, b])? };
            deopts += 1;
            assert_eq!(result, compiled, "a = {a}, b = {b}, deopt at poll {point}");
            assert_eq!(rt.stats().deopts, deopts);
            assert_eq!(rt.revalidate("compute")?, 3);
            checked += 1;
        }
        // Invalidated before the call: deoptimizes at the first stack map.
        assert_eq!(rt.invalidate("compute")?, 3);
        // SAFETY: as above.
        assert_eq!(unsafe { rt.call("compute", &[a, b])? }, compiled);
        deopts += 1;
        assert_eq!(rt.revalidate("compute")?, 3);
        // SAFETY: as above.
        assert_eq!(unsafe { rt.call("compute", &[a, b])? }, compiled);
        assert_eq!(rt.stats().deopts, deopts);
    }
    eprintln!(
        "deopt points checked: {checked} (+{} before the call)",
        INPUTS.len()
    );
    // Register, Direct, Indirect, Constant, ConstantIndex.
    assert_eq!(rt.deopt_location_kinds(), [1, 2, 3, 4, 5]);
    Ok(())
}

#[test]
fn a_shadow_is_patched_and_put_back() -> TestResult {
    let rt = Runtime::new("deopt.ll", DEOPT_PROGRAM, true)?;
    let mut originals = Vec::new();
    for id in [100u64, 101, 102] {
        let site = rt.site_address(id).ok_or("no site")?;
        let reserved = rt.sites()[&id].reserved;
        originals.push((
            site,
            reserved,
            rt.code_bytes(site, reserved).ok_or("no code")?,
        ));
    }
    assert_eq!(rt.invalidate("compute")?, 3);
    assert_eq!(rt.invalidate("compute")?, 0);
    for (site, reserved, original) in &originals {
        let patched = rt.code_bytes(*site, *reserved).ok_or("no code")?;
        assert_ne!(&patched, original);
        assert_eq!(patched[0], 0xe8);
        let rel = i32::from_le_bytes([patched[1], patched[2], patched[3], patched[4]]);
        let stub = rt
            .jit()
            .function_address("locus.deopt.stub")
            .ok_or("no stub")?;
        assert_eq!(site.wrapping_add(5).wrapping_add(rel as i64 as u64), stub);
        assert_eq!(
            patched[5..],
            locus_stackmap::patch::encode_nops(Arch::X86_64, reserved - 5)?
        );
    }
    assert_eq!(rt.revalidate("compute")?, 3);
    for (site, reserved, original) in &originals {
        assert_eq!(&rt.code_bytes(*site, *reserved).ok_or("no code")?, original);
    }
    assert_eq!(rt.stats().patches, 6);
    Ok(())
}

/// [`IC_PROGRAM`] with sites wide enough for inline fast paths: 64 bytes (two cases
/// counting hits, three without) and 56 for site 3 (one case counting, two without).
fn wide_program() -> String {
    IC_PROGRAM
        .replace("i32 16, ptr", "i32 64, ptr")
        .replace("i32 24, ptr", "i32 56, ptr")
}

#[test]
fn inline_fast_paths_give_the_same_answers_and_counts_as_stubs() -> TestResult {
    let wide = wide_program();
    let reference = run_script(false)?;
    for program in [IC_PROGRAM, wide.as_str()] {
        for count_hits in [true, false] {
            for inline_fast_path in [true, false] {
                let options = Options {
                    caching: true,
                    count_hits,
                    inline_fast_path,
                    ..Options::default()
                };
                let run = run_script_with(program, options)?;
                assert_eq!(run.answers, reference.answers, "{options:?}");
                assert_eq!(run.misses, run.model_misses, "{options:?}");
                if count_hits {
                    assert_eq!(run.hits + run.misses, run.reads, "{options:?}");
                } else {
                    assert_eq!(run.hits, 0, "{options:?}");
                }
            }
        }
    }
    Ok(())
}

#[test]
fn a_wide_site_gets_the_fast_path_inline_until_it_no_longer_fits() -> TestResult {
    let wide = wide_program();
    let miss = Runtime::miss_handler_address();
    for count_hits in [true, false] {
        let options = Options {
            caching: true,
            count_hits,
            inline_fast_path: true,
            ..Options::default()
        };
        let rt = Runtime::with_options("wide.ll", &wide, options)?;
        let shapes: Vec<ShapeId> = [[X, Y, Z], [Y, X, Z], [Z, Y, X], [Y, Z, X]]
            .iter()
            .map(|s| rt.add_shape(s))
            .collect();
        // x is in slot 0, 1, 2, 2.
        let slots = [0usize, 1, 2, 2];
        let objects: Vec<u64> = [[1, 2, 3], [20, 10, 30], [300, 200, 100], [2000, 3000, 1000]]
            .iter()
            .zip(&shapes)
            .map(|(values, shape)| rt.new_object(*shape, values))
            .collect::<Result<_, _>>()?;
        let x_of = [1i64, 10, 100, 1000];
        let y_of = [2i64, 20, 200, 2000];
        let site = rt.site_address(1).ok_or("no site")?;
        assert_eq!(
            rt.code_bytes(site, 64),
            Some(encode_call(Arch::X86_64, miss, 64)?)
        );
        let mut cases: Vec<(u64, usize)> = Vec::new();
        for (i, object) in objects.iter().enumerate() {
            let before = rt.stats();
            // SAFETY: `@sum` takes an object of this runtime.
            assert_eq!(unsafe { rt.call("sum", &[*object])? }, x_of[i] + y_of[i]);
            let after = rt.stats();
            assert_eq!(
                after.misses - before.misses,
                2,
                "count_hits {count_hits}, {i}"
            );
            cases.push((shapes[i].0, slots[i]));
            cases.sort_unstable();
            let bytes = rt.code_bytes(site, 64).ok_or("no code")?;
            // Counting, two cases fit 64 bytes; not counting, three.
            let fits = cases.len() <= if count_hits { 2 } else { 3 };
            if fits {
                assert_eq!(after.stubs, before.stubs, "count_hits {count_hits}, {i}");
                let path = encode_fast_path(&cases, rt.object_index(), count_hits, 64)
                    .ok_or("no fast path")?;
                assert_eq!(bytes, path.bytes);
            } else {
                assert_eq!(bytes, encode_call(Arch::X86_64, target_of(&bytes), 64)?);
                assert_ne!(target_of(&bytes), miss);
            }
            // Every object seen so far hits now, without entering the runtime.
            let before = rt.stats();
            for (j, object) in objects.iter().enumerate().take(i + 1) {
                // SAFETY: as above.
                assert_eq!(unsafe { rt.call("sum", &[*object])? }, x_of[j] + y_of[j]);
            }
            let after = rt.stats();
            assert_eq!(after.misses, before.misses);
            assert_eq!(after.patches, before.patches);
            let expected_hits = if count_hits { 2 * (i as u64 + 1) } else { 0 };
            assert_eq!(after.hits - before.hits, expected_hits);
        }
        // A shape change patches the site back to the miss handler.
        assert_eq!(rt.change_shape(shapes[0], &[X, Z, Y])?, 2);
        assert_eq!(
            rt.code_bytes(site, 64),
            Some(encode_call(Arch::X86_64, miss, 64)?)
        );
        // SAFETY: as above.
        assert_eq!(unsafe { rt.call("sum", &[objects[0]])? }, 3);
    }
    Ok(())
}

/// The bytes `llvm-mc-19` assembles each of `texts` (AT&T syntax) to, in one run: each
/// text in a section of its own (its `.L` labels made its own), the sections dumped by one
/// `llvm-objcopy-19`.
fn assemble_all(texts: &[String]) -> Result<Vec<Vec<u8>>, Box<dyn StdError>> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "locus-assemble-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)?;
    let mut source = String::new();
    for (i, text) in texts.iter().enumerate() {
        source += &format!(".section .text.t{i},\"ax\",@progbits\n");
        source += &text.replace(".L", &format!(".L{i}_"));
    }
    let object = dir.join("all.o");
    let mut mc = Command::new("llvm-mc-19")
        .args(["-triple=x86_64", "-filetype=obj", "-o"])
        .arg(&object)
        .stdin(Stdio::piped())
        .spawn()?;
    mc.stdin
        .take()
        .ok_or("no stdin")?
        .write_all(source.as_bytes())?;
    assert!(mc.wait()?.success(), "llvm-mc-19 failed");
    let mut objcopy = Command::new("llvm-objcopy-19");
    for i in 0..texts.len() {
        objcopy.arg("--dump-section").arg(format!(
            ".text.t{i}={}",
            dir.join(format!("t{i}.bin")).display()
        ));
    }
    let status = objcopy.arg(&object).arg(dir.join("out.o")).status()?;
    assert!(status.success());
    let bytes = (0..texts.len())
        .map(|i| std::fs::read(dir.join(format!("t{i}.bin"))))
        .collect::<Result<Vec<_>, _>>()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(bytes)
}

/// The assembly text of the object check up to its `jne`, and the operands of the miss
/// handler's and the hit counter's words: through `r11` (`movabs`), or as absolute 32-bit
/// addresses when `near` (an index in the low 2 GiB).
fn header_text(index: ObjectIndex, near: bool) -> (String, String, String) {
    if near {
        let base = index.base as i64;
        (
            format!(
                "movl %edi, %eax\nandl ${:#x}, %eax\ncmpq %rdi, {base}(%rax)\njne .Lmiss\n",
                index.mask
            ),
            format!("{}", base - 16),
            format!("{}", base - 8),
        )
    } else {
        (
            format!(
                "movabsq ${:#x}, %r11\nmovl %edi, %eax\nandl ${:#x}, %eax\n\
                 cmpq %rdi, (%r11,%rax)\njne .Lmiss\n",
                index.base, index.mask
            ),
            "-16(%r11)".to_owned(),
            "-8(%r11)".to_owned(),
        )
    }
}

/// The fast path as assembly text, with `pad` bytes of nops after the miss call; the
/// branches to labels, for the assembler to encode. `near`: the short form (no `movabs`).
fn fast_path_text(
    cases: &[(u64, usize)],
    index: ObjectIndex,
    count_hits: bool,
    pad: usize,
    near: bool,
) -> String {
    let (mut text, miss, hits) = header_text(index, near);
    for (i, (shape, _)) in cases.iter().enumerate() {
        text += &format!("cmpq ${}, (%rdi)\nje .Lcase{i}\n", *shape as i64);
    }
    text += &format!(".Lmiss:\ncallq *{miss}\n");
    // The padding is never run: nops as the patch writer encodes them (the codegen's
    // `NOOPL` displacements, not `.nops`'s zeros), written as bytes.
    let nops = locus_stackmap::patch::encode_nops(Arch::X86_64, pad).unwrap_or_default();
    for byte in nops {
        text += &format!(".byte {byte:#x}\n");
    }
    for (i, (_, slot)) in cases.iter().enumerate() {
        text += &format!(".Lcase{i}:\n");
        if count_hits {
            text += &format!("incq {hits}\n");
        }
        text += &format!("movq {}(%rdi), %rax\n", 8 * (slot + 1));
        if i + 1 < cases.len() {
            text += "jmp .Lend\n";
        }
    }
    text += ".Lend:\n";
    text
}

/// Indexes as a runtime places them: far (a `movabs` of the base) and near (in the low
/// 2 GiB, reached by 32-bit displacements), each 256 MiB (mask 2^28 - 8) and tiny (a mask
/// that is an imm8).
const INDEXES: [ObjectIndex; 4] = [
    ObjectIndex {
        base: 0x7f12_3456_1000,
        mask: (1 << 28) - 8,
    },
    ObjectIndex {
        base: 0x5555_0000_2000,
        mask: 120,
    },
    ObjectIndex {
        base: 0x4000_1000,
        mask: (1 << 28) - 8,
    },
    ObjectIndex {
        base: 0x7fff_f000,
        mask: 120,
    },
];

#[test]
fn fast_path_encodings_match_llvm_mc() -> TestResult {
    let indexes = INDEXES;
    let case_sets: [&[(u64, usize)]; 6] = [
        &[(0, 0)],
        &[(3, 2), (127, 14)],
        &[(128, 15)],
        &[(70_000, 300), (0x7fff_ffff, 1)],
        &[(1, 0), (2, 1), (5, 2)],
        &[(u64::MAX, 0)],
    ];
    // Every text first, assembled in one run; then the checks.
    const EXTRAS: [usize; 4] = [0, 1, 7, 16];
    let mut texts = Vec::new();
    let mut plan = Vec::new();
    for index in indexes {
        let near = index.near().is_some();
        for cases in case_sets {
            for count_hits in [false, true] {
                let at = texts.len();
                texts.push(fast_path_text(cases, index, count_hits, 0, false));
                for extra in EXTRAS {
                    texts.push(fast_path_text(cases, index, count_hits, extra, near));
                }
                plan.push((index, cases, count_hits, at));
            }
        }
    }
    let assembled = assemble_all(&texts)?;
    let mut checked = 0;
    for (index, cases, count_hits, at) in plan {
        let near = index.near().is_some();
        // The miss call's bytes: `call *-16(%r11)`, or `call *(base - 16)`.
        let miss_call = match index.near() {
            Some(base) => [&[0xff, 0x14, 0x25][..], &(base - 16).to_le_bytes()].concat(),
            None => vec![0x41, 0xff, 0x53, 0xf0],
        };
        // Near, the `movabs` form is the fallback where the short one does not fit (it is
        // shorter with hits counted in several cases).
        let far = &assembled[at];
        let bare = &assembled[at + 1];
        for (k, extra) in EXTRAS.iter().enumerate() {
            let reserved = bare.len() + extra;
            let path = encode_fast_path(cases, index, count_hits, reserved)
                .ok_or_else(|| format!("no fast path for {cases:?} in {reserved}"))?;
            let expected = &assembled[at + 1 + k];
            assert_eq!(
                &path.bytes, expected,
                "{cases:?}, {index:?}, {count_hits}, {reserved}"
            );
            // The miss call returns to the end of the dispatch and the call.
            let dispatch = expected.len() - extra;
            assert!(path.miss_return < dispatch);
            assert_eq!(
                path.bytes[path.miss_return - miss_call.len()..path.miss_return],
                miss_call[..]
            );
            checked += 1;
        }
        if near && far.len() < bare.len() {
            let path = encode_fast_path(cases, index, count_hits, far.len())
                .ok_or("no fast path in the movabs form's size")?;
            assert_eq!(&path.bytes, far, "{cases:?}, {index:?}, {count_hits}");
            checked += 1;
        }
        // One byte too few for either form: no fast path.
        let least = bare.len().min(far.len());
        assert!(encode_fast_path(cases, index, count_hits, least - 1).is_none());
    }
    assert_eq!(checked, 96 * 2 + 6);
    let index = indexes[0];
    // Shapes beyond a sign-extended 32-bit immediate and no cases: none.
    assert!(encode_fast_path(&[(1 << 31, 0)], index, false, 200).is_none());
    assert!(encode_fast_path(&[], index, false, 200).is_none());
    // The documented sizes (shapes -128..=127, slots below 15).
    let size_in = |index: ObjectIndex, n: usize, count_hits: bool| {
        let cases: Vec<(u64, usize)> = (0..n as u64).map(|s| (s, 1)).collect();
        (13..200).find(|r| encode_fast_path(&cases, index, count_hits, *r).is_some())
    };
    let size = |n, count_hits| size_in(index, n, count_hits);
    assert_eq!(size(1, false), Some(37));
    assert_eq!(size(1, true), Some(41));
    assert_eq!(size(2, false), Some(49));
    assert_eq!(size(2, true), Some(57));
    assert_eq!(size(3, false), Some(61));
    assert_eq!(size(3, true), Some(73));
    // Near (no `movabs`): 7 bytes fewer, but the hit counter's `inc` is 4 more per case
    // and the miss call 3 more; counting hits, the `movabs` form is as small or smaller.
    let size = |n, count_hits| size_in(indexes[2], n, count_hits);
    assert_eq!(size(1, false), Some(33));
    assert_eq!(size(1, true), Some(41));
    assert_eq!(size(2, false), Some(45));
    assert_eq!(size(2, true), Some(57));
    Ok(())
}

/// A stub as assembly text, branches to labels for the assembler to encode and relax.
fn stub_text(cases: &[(u64, usize)], index: ObjectIndex, count_hits: bool) -> String {
    let (mut text, miss, hits) = header_text(index, index.near().is_some());
    for (i, (shape, slot)) in cases.iter().enumerate() {
        let shape = *shape as i64;
        if i32::try_from(shape).is_ok() {
            text += &format!("cmpq ${shape}, (%rdi)\n");
        } else {
            text += &format!("movabsq ${shape}, %rax\ncmpq %rax, (%rdi)\n");
        }
        text += &format!("jne .Lnext{i}\n");
        if count_hits {
            text += &format!("incq {hits}\n");
        }
        text += &format!("movq {}(%rdi), %rax\nretq\n.Lnext{i}:\n", 8 * (slot + 1));
    }
    text += &format!(".Lmiss:\njmpq *{miss}\n");
    text
}

#[test]
fn stub_encodings_match_llvm_mc() -> TestResult {
    let indexes = INDEXES;
    // Twelve cases: the object check's `jne` no longer fits a rel8.
    let many: Vec<(u64, usize)> = (0..12).map(|s| (s * 1000, s as usize * 7)).collect();
    let case_sets: [&[(u64, usize)]; 7] = [
        &[(0, 0)],
        &[(3, 2), (127, 14)],
        &[(128, 15)],
        &[(70_000, 300), (0x7fff_ffff, 1)],
        &[(1 << 31, 0), (u64::MAX, 3), (0x1234_5678_9abc, 70_000)],
        &[(1, 0), (2, 1), (5, 2), (9, 3)],
        &many,
    ];
    let mut texts = Vec::new();
    let mut plan = Vec::new();
    for index in indexes {
        for cases in case_sets {
            for count_hits in [false, true] {
                plan.push((index, cases, count_hits));
                texts.push(stub_text(cases, index, count_hits));
            }
        }
    }
    let assembled = assemble_all(&texts)?;
    let mut checked = 0;
    for ((index, cases, count_hits), expected) in plan.into_iter().zip(&assembled) {
        let stub = encode_stub(cases, index, count_hits).ok_or("no stub")?;
        assert_eq!(&stub, expected, "{cases:?}, {index:?}, {count_hits}");
        checked += 1;
    }
    assert_eq!(checked, 56);
    assert!(encode_stub(&[], indexes[0], false).is_none());
    // One case, counting hits: 42 bytes (23 of them the object check).
    assert_eq!(
        encode_stub(&[(0, 0)], indexes[0], true).map(|s| s.len()),
        Some(42)
    );
    // Near: 16 of the check (no `movabs`), 8 for the count, 7 for the miss's jump: 42.
    assert_eq!(
        encode_stub(&[(0, 0)], indexes[2], true).map(|s| s.len()),
        Some(42)
    );
    Ok(())
}

/// Stubs live in the runtime's own memory: a site's stub is the bytes `encode_stub` gives,
/// and the memory of a stub is reused once no site calls it (a shape change patches the
/// site back, the re-miss makes the stub again in the same block).
#[test]
fn stubs_are_encoded_into_memory_the_runtime_reuses() -> TestResult {
    let rt = Runtime::new("ic.ll", IC_PROGRAM, true)?;
    let a = rt.add_shape(&[X, Y, Z]);
    let b = rt.add_shape(&[Y, X, Z]);
    let oa = rt.new_object(a, &[4, 5, 6])?;
    let ob = rt.new_object(b, &[50, 40, 60])?;
    let site = rt.site_address(1).ok_or("no site")?;
    let site_2 = rt.site_address(2).ok_or("no site")?;
    // The stubs the two sites call.
    let targets = || -> Result<HashSet<u64>, Box<dyn StdError>> {
        [site, site_2]
            .iter()
            .map(|s| Ok(target_of(&rt.code_bytes(*s, 16).ok_or("no code")?)))
            .collect()
    };
    // SAFETY: `@sum` takes an object of this runtime.
    let call = |o: u64| unsafe { rt.call("sum", &[o]) };
    assert_eq!(call(oa)?, 9);
    assert_eq!(call(ob)?, 90);
    let stub = target_of(&rt.code_bytes(site, 16).ok_or("no code")?);
    let mut blocks = targets()?;
    let expected = encode_stub(&[(a.0, 0), (b.0, 1)], rt.object_index(), true).ok_or("no stub")?;
    assert_eq!(rt.code_bytes(stub, expected.len()), Some(expected));
    let (used, mapped) = rt.stub_memory();
    // Two sites, each calling one stub of two cases (64 bytes each).
    assert_eq!(used, 128);
    for i in 0..200 {
        let order: &[u64] = if i % 2 == 0 { &[Z, Y, X] } else { &[Y, X, Z] };
        assert_eq!(rt.change_shape(b, order)?, 2);
        assert_eq!(rt.stub_memory(), (0, mapped));
        assert_eq!(call(ob)?, 90);
        assert_eq!(call(oa)?, 9);
        assert_eq!(rt.stub_memory(), (used, mapped), "{i}");
        blocks.extend(targets()?);
    }
    // The same blocks again and again: the two of the first round, and the one freed
    // while the second site's stub was made (a site's new stub is made before its old one
    // is freed).
    assert_eq!(blocks.len(), 3, "{blocks:x?}");
    // 4 stubs at first, then 4 per cycle (shape a alone, then a and b, at each site).
    assert_eq!(rt.stats().stubs, 4 + 200 * 4);
    Ok(())
}

#[test]
fn a_big_site_runs_its_fast_path_with_the_padding_split() -> TestResult {
    let index = ObjectIndex {
        base: 0x7f12_3456_1000,
        mask: (1 << 28) - 8,
    };
    let path = encode_fast_path(&[(1, 0), (2, 1)], index, false, 300).ok_or("no fast path")?;
    assert_eq!(path.bytes.len(), 300);
    let program = IC_PROGRAM.replace("i32 16, ptr", "i32 200, ptr");
    let rt = Runtime::with_options(
        "big.ll",
        &program,
        Options {
            count_hits: false,
            ..Options::default()
        },
    )?;
    let a = rt.add_shape(&[X, Y, Z]);
    let b = rt.add_shape(&[Y, X, Z]);
    let oa = rt.new_object(a, &[4, 5, 6])?;
    let ob = rt.new_object(b, &[50, 40, 60])?;
    for _ in 0..3 {
        // SAFETY: `@sum` takes an object of this runtime.
        assert_eq!(unsafe { rt.call("sum", &[oa])? }, 9);
        // SAFETY: as above.
        assert_eq!(unsafe { rt.call("sum", &[ob])? }, 90);
    }
    assert_eq!(rt.stats().misses, 4);
    assert_eq!(rt.stats().stubs, 0);
    // A failed miss from an inline fast path ends the call (the compiled frames are
    // dropped); the site answers the next call as before.
    let c = rt.add_shape(&[X, Z]);
    let oc = rt.new_object(c, &[1, 3])?;
    // SAFETY: as above.
    let err = unsafe { rt.call("sum", &[oc]) }
        .err()
        .ok_or("expected an error")?;
    assert!(err.to_string().contains("no property 20"), "{err}");
    // SAFETY: as above.
    assert_eq!(unsafe { rt.call("sum", &[oa])? }, 9);
    Ok(())
}

/// A program that moved its stack pointer off the thread's stack (here into memory the test
/// maps, with an inaccessible page above it) and passes names between that stack pointer
/// and `Runtime::call`'s frame: they are not on its stack, and the call ends with an error
/// naming the entry point. The runtime used to take everything between the two for the
/// program's stack and read the names there (a SIGSEGV in Rust on the inaccessible page).
#[test]
fn names_off_the_threads_stack_are_refused() -> TestResult {
    const PROGRAM: &str = r#"
declare i64 @locus_shape_new(ptr, i64)
declare ptr @llvm.stacksave.p0()
declare void @llvm.stackrestore.p0(ptr)

define i64 @main(ptr %top) {
  %old = call ptr @llvm.stacksave.p0()
  call void @llvm.stackrestore.p0(ptr %top)
  %names = getelementptr i8, ptr %top, i64 8
  %s = call i64 @locus_shape_new(ptr %names, i64 2)
  call void @llvm.stackrestore.p0(ptr %old)
  ret i64 %s
}
"#;
    const STACK: usize = 1 << 20;
    const GUARD: usize = 1 << 16;
    // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
    let region = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            STACK + GUARD,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(region, libc::MAP_FAILED);
    let top = region as u64 + STACK as u64;
    // SAFETY: the last GUARD bytes of the mapping made above.
    let protected = unsafe { libc::mprotect(top as *mut libc::c_void, GUARD, libc::PROT_NONE) };
    assert_eq!(protected, 0);
    let rt = Runtime::new("stack.ll", PROGRAM, true)?;
    // SAFETY: `@main` takes a pointer; the stack it moves to is STACK bytes of the mapping,
    // and it moves back before returning (or the runtime drops its frames).
    let result = unsafe { rt.call("main", &[top]) };
    // SAFETY: the mapping made above; nothing uses it after the call.
    unsafe { libc::munmap(region, STACK + GUARD) };
    let err = result.err().ok_or("expected an error")?;
    assert!(
        err.to_string().contains(
            "locus_shape_new (called from @main): 2 names at \
             0x"
        ) && err
            .to_string()
            .contains("are neither in the program's sections nor on its stack"),
        "{err}"
    );
    Ok(())
}

/// A value live in rbx across a patch point: LLVM's live-out analysis lists rbx (DWARF 3)
/// in the record, unless the analysis is off.
const LIVE_ACROSS: &str = r#"
declare i64 @llvm.experimental.patchpoint.i64(i64, i32, ptr, i32, ...)

define i64 @f() {
  %a = call i64 asm sideeffect "", "={rbx}"()
  %r = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 7, i32 16, ptr null, i32 0)
  call void asm sideeffect "", "{rbx}"(i64 %a)
  %s = add i64 %r, %a
  ret i64 %s
}
"#;

fn live_out_registers(ir: &str) -> Result<Vec<u16>, Box<dyn StdError>> {
    let jit = locus_llvm::jit_stackmaps::StackMapJit::new("live.ll", ir, &[])?;
    let record = jit
        .stack_maps()
        .iter()
        .find(|r| r.record.id() == 7)
        .ok_or("no record 7")?;
    Ok(record.record.live_outs().map(|l| l.dwarf_reg).collect())
}

/// The runtime compiles its programs without patch point live-outs (LLVM 19 crashes
/// computing them there); modules compiled afterwards keep theirs: the option LLVM reads
/// is turned off for the runtime's own compilation only.
#[test]
fn patchpoint_live_outs_are_off_only_for_the_runtimes_programs() -> TestResult {
    let before = live_out_registers(LIVE_ACROSS)?;
    assert!(before.contains(&3), "rbx is live across: {before:?}");
    let runtime = Runtime::new("ic.ll", IC_PROGRAM, true)?;
    let record = runtime
        .jit()
        .stack_maps()
        .iter()
        .next()
        .ok_or("the runtime's program has no record")?;
    assert_eq!(record.record.live_outs().len(), 0);
    assert_eq!(live_out_registers(LIVE_ACROSS)?, before);
    Ok(())
}

/// `get(o, Y)` through a 16-byte patch point (a stub's call once patched) and through a
/// 64-byte one (the fast path inline).
const FORGE_PROGRAM: &str = r#"
declare i64 @llvm.experimental.patchpoint.i64(i64, i32, ptr, i32, ...)
declare i64 @locus_ic_miss(ptr, i64)

define i64 @small(ptr %o) {
  %v = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 1, i32 16, ptr @locus_ic_miss, i32 2, ptr %o, i64 20)
  ret i64 %v
}

define i64 @wide(ptr %o) {
  %v = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 2, i32 64, ptr @locus_ic_miss, i32 2, ptr %o, i64 20)
  ret i64 %v
}
"#;

/// What a call of `function` on `object` answered: its value or its error.
fn answer(rt: &Runtime, function: &str, object: u64) -> Result<i64, String> {
    // SAFETY: `@small` and `@wide` take one pointer and read a property of it through a
    // patch point. Whatever the address, nothing reads it before the runtime found it to
    // be one of its objects: the miss handler asks its table, and the patched fast path
    // and stub its object index (which is what the forged objects below test).
    unsafe { rt.call(function, &[object]) }.map_err(|e| e.to_string())
}

/// Forged objects are refused the same with caching on (at a patched inline fast path or
/// stub) and off: copies of an object's words elsewhere (heap, stack, unaligned, inside
/// another object through `set_property`, in the arena's free space), addresses inside
/// an object, null, objects of another runtime, live or dropped. Before the object check,
/// a patched site took any memory whose first word was a cached shape for an object (and
/// faulted on null or unmapped memory), where the miss handler refused it.
#[test]
fn forged_objects_are_refused_alike_with_and_without_caching() -> TestResult {
    let option_sets = [
        Options::default(),
        Options {
            count_hits: false,
            ..Options::default()
        },
        Options {
            inline_fast_path: false,
            ..Options::default()
        },
        Options {
            caching: false,
            ..Options::default()
        },
    ];
    let (mut refused, mut swept) = (0, 0);
    let mut outcomes: Vec<Vec<Result<i64, String>>> = Vec::new();
    for options in option_sets {
        let rt = Runtime::with_options("forge.ll", FORGE_PROGRAM, options)?;
        let s = rt.add_shape(&[X, Y, Z]);
        let b = rt.add_shape(&[1, 2, 3, 4, 5, 6]);
        let o = rt.new_object(s, &[1, 2, 3])?;
        // A copy of `o`'s words inside `big`, at `big + 16`, made through the surface.
        let big = rt.new_object(b, &[0; 6])?;
        for (name, value) in [(2, s.0 as i64), (3, 1), (4, 2), (5, 3)] {
            rt.set_property(big, name, value)?;
        }
        let tail = rt.new_object(s, &[4, 5, 6])?;
        for f in ["small", "wide"] {
            assert_eq!(answer(&rt, f, o), Ok(2), "{options:?}");
        }
        if options.caching && options.inline_fast_path {
            let site = rt.site_address(2).ok_or("no site 2")?;
            let path = encode_fast_path(&[(s.0, 1)], rt.object_index(), options.count_hits, 64)
                .ok_or("no fast path")?;
            assert_eq!(rt.code_bytes(site, 64), Some(path.bytes), "{options:?}");
        }
        let mut words = [0u64; 4];
        for (i, word) in words.iter_mut().enumerate() {
            // SAFETY: `o` is an object of 4 words of the live runtime.
            *word = unsafe { (o as *const u64).wrapping_add(i).read() };
        }
        assert_eq!(words, [s.0, 1, 2, 3]);
        let heap = words.to_vec();
        let stack = words;
        let mut bytes = [0u8; 40];
        for (i, word) in words.iter().enumerate() {
            bytes[1 + 8 * i..9 + 8 * i].copy_from_slice(&word.to_le_bytes());
        }
        // The arena is mapped whole and hands out objects from its start, one after
        // another: the 4 words after `tail` are free arena memory.
        let free = tail + 32;
        assert!(!rt.is_object(free));
        for (i, word) in words.iter().enumerate() {
            // SAFETY: free memory of the live runtime's arena, mapped read-write; no object
            // and no Rust reference covers it.
            unsafe { (free as *mut u64).wrapping_add(i).write(*word) };
        }
        let other = Runtime::new("other.ll", FORGE_PROGRAM, true)?;
        let other_shape = other.add_shape(&[X, Y, Z]);
        assert_eq!(other_shape, s);
        let foreign = other.new_object(other_shape, &[7, 8, 9])?;
        let dropped = {
            let gone = Runtime::new("gone.ll", FORGE_PROGRAM, true)?;
            let shape = gone.add_shape(&[X, Y, Z]);
            gone.new_object(shape, &[7, 8, 9])?
        };
        let forged: [(&str, u64); 12] = [
            ("a copy on the heap", heap.as_ptr() as u64),
            ("a copy on the stack", stack.as_ptr() as u64),
            ("an unaligned copy", bytes.as_ptr() as u64 + 1),
            ("a copy inside an object", big + 16),
            ("an address inside an object", o + 8),
            ("a copy in the arena's free space", free),
            ("null", 0),
            ("an unaligned address in an object", o + 1),
            ("an address sharing the object's index word", o + (1 << 28)),
            ("an object of another runtime", foreign),
            ("an object of a dropped runtime", dropped),
            ("the last address", u64::MAX),
        ];
        let stats = rt.stats();
        let mut outcome = Vec::new();
        for (what, address) in forged {
            assert!(!rt.is_object(address) && !rt.is_indexed(address), "{what}");
            for f in ["small", "wide"] {
                let got = answer(&rt, f, address);
                let expected =
                    format!("JIT error: `{f}`: {address:#x} is not an object of this runtime");
                assert_eq!(got, Err(expected), "{what}, {f}, {options:?}");
                outcome.push(got);
                refused += 1;
                // The site still answers for the real object, without missing.
                assert_eq!(answer(&rt, f, o), Ok(2), "{what}, {f}, {options:?}");
            }
        }
        let after = rt.stats();
        // Each forged read entered the miss handler once; nothing was patched.
        assert_eq!(
            after.misses - stats.misses,
            24 + if options.caching { 0 } else { 24 }
        );
        assert_eq!(after.patches, stats.patches);
        if options.caching && options.count_hits {
            assert_eq!(after.hits - stats.hits, 24);
        }
        outcomes.push(outcome);
        // The index and the table agree at every byte around the objects.
        for address in (o - 64..tail + 96).chain([0, 8, u64::MAX, foreign, dropped]) {
            assert_eq!(
                rt.is_object(address),
                rt.is_indexed(address),
                "{address:#x}"
            );
            swept += 1;
        }
        for real in [o, big, tail] {
            assert!(rt.is_object(real) && rt.is_indexed(real));
        }
        drop(other);
    }
    assert!(outcomes.iter().all(|o| o.len() == 24));
    eprintln!("forged reads refused: {refused} (12 forgeries, 2 sites, 4 option sets); addresses swept: {swept}");
    Ok(())
}

/// `get(o, Y)` through a 16-byte site (stubs) and a 64-byte one (inline fast paths while
/// they fit).
const POLY_PROGRAM: &str = r#"
declare i64 @llvm.experimental.patchpoint.i64(i64, i32, ptr, i32, ...)
declare i64 @locus_ic_miss(ptr, i64)

define i64 @small(ptr %o) {
  %v = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 1, i32 16, ptr @locus_ic_miss, i32 2, ptr %o, i64 20)
  ret i64 %v
}

define i64 @wide(ptr %o) {
  %v = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 2, i32 64, ptr @locus_ic_miss, i32 2, ptr %o, i64 20)
  ret i64 %v
}
"#;

/// Sites are polymorphic up to `max_shapes` shapes, then megamorphic: patched once more,
/// to the runtime's lookup, which answers every shape (new ones too) with no further miss
/// or patch; a shape change leaves them so; a forged object is refused as with caching
/// off. Answers equal the objects' properties throughout.
#[test]
fn sites_go_megamorphic_after_max_shapes() -> TestResult {
    let orders: [[u64; 3]; 6] = [
        [X, Y, Z],
        [Y, X, Z],
        [Z, X, Y],
        [Z, Y, X],
        [Y, Z, X],
        [X, Z, Y],
    ];
    for max_shapes in [0usize, 1, 2, 4] {
        let options = Options {
            max_shapes,
            ..Options::default()
        };
        let rt = Runtime::with_options("poly.ll", POLY_PROGRAM, options)?;
        let shapes: Vec<ShapeId> = orders.iter().map(|o| rt.add_shape(o)).collect();
        let objects: Vec<u64> = shapes
            .iter()
            .zip(&orders)
            .enumerate()
            .map(|(i, (shape, order))| {
                let values: Vec<i64> = order
                    .iter()
                    .map(|n| if *n == Y { 100 + i as i64 } else { -1 })
                    .collect();
                rt.new_object(*shape, &values)
            })
            .collect::<Result<_, _>>()?;
        let sites = [
            rt.site_address(1).ok_or("no site")?,
            rt.site_address(2).ok_or("no site")?,
        ];
        let lookup = Runtime::lookup_address();
        for (i, object) in objects.iter().enumerate() {
            let before = rt.stats();
            for f in ["small", "wide"] {
                assert_eq!(
                    answer(&rt, f, *object),
                    Ok(100 + i as i64),
                    "{max_shapes} {i}"
                );
            }
            let after = rt.stats();
            let mega = i + 1 > max_shapes;
            for (site, reserved) in sites.iter().zip([16usize, 64]) {
                assert_eq!(rt.is_megamorphic(*site), mega);
                if mega {
                    assert_eq!(
                        rt.code_bytes(*site, reserved),
                        Some(encode_call(Arch::X86_64, lookup, reserved)?)
                    );
                }
            }
            // A miss (and a patch) at each site until it is megamorphic; the read that
            // makes it so is answered by the miss handler, the rest by the lookup.
            let first_mega = i == max_shapes;
            let (misses, patches, lookups) = match (mega, first_mega) {
                (false, _) => (2, 2, 0),
                (true, true) => (2, 2, 0),
                (true, false) => (0, 0, 2),
            };
            assert_eq!(after.misses - before.misses, misses, "{max_shapes} {i}");
            assert_eq!(after.patches - before.patches, patches, "{max_shapes} {i}");
            assert_eq!(after.lookups - before.lookups, lookups, "{max_shapes} {i}");
        }
        // Every shape again: no miss, no patch.
        let before = rt.stats();
        for (i, object) in objects.iter().enumerate() {
            for f in ["small", "wide"] {
                assert_eq!(answer(&rt, f, *object), Ok(100 + i as i64));
            }
        }
        let after = rt.stats();
        assert_eq!(
            (after.misses, after.patches),
            (before.misses, before.patches)
        );
        assert_eq!(after.lookups - before.lookups, 12);
        // A shape change leaves megamorphic sites alone, and they answer the new order.
        assert_eq!(rt.change_shape(shapes[0], &[Z, Y, X])?, 0);
        assert_eq!(answer(&rt, "small", objects[0]), Ok(100));
        // A forged object: refused as the miss handler refuses it.
        let copy: Vec<u64> = (0..4)
            // SAFETY: `objects[1]` is an object of 4 words of the live runtime.
            .map(|i| unsafe { (objects[1] as *const u64).wrapping_add(i).read() })
            .collect();
        let forged = copy.as_ptr() as u64;
        assert_eq!(
            answer(&rt, "wide", forged),
            Err(format!(
                "JIT error: `wide`: {forged:#x} is not an object of this runtime"
            ))
        );
        assert_eq!(
            rt.stats().hits + rt.stats().misses + rt.stats().lookups,
            2 * 6 + 12 + 2
        );
    }
    Ok(())
}

/// With concurrent patching a site's inline fast path is a body after its call form,
/// written once (a thread may be running it whenever it was ever switched to) and
/// switched to and from by the first instruction alone: after the body for shape 0, a
/// site specialized on shape 1 calls a stub (its body unchanged), on shape 0 again jumps
/// to the same body, and every patch leaves the bytes after `call r11` as they were.
#[test]
fn a_concurrent_site_writes_its_fast_path_once() -> TestResult {
    let options = Options {
        concurrent_patching: true,
        ..Options::default()
    };
    let rt = Runtime::with_options("once.ll", POLY_PROGRAM, options)?;
    let a = rt.add_shape(&[X, Y, Z]);
    let b = rt.add_shape(&[Y, Z, X]);
    let oa = rt.new_object(a, &[1, 2, 3])?;
    let ob = rt.new_object(b, &[20, 30, 10])?;
    let site = rt.site_address(2).ok_or("no site")?;
    let llvm = rt.code_bytes(site, 64).ok_or("no code")?;
    assert_eq!(answer(&rt, "wide", oa), Ok(2));
    let first = rt.code_bytes(site, 64).ok_or("no code")?;
    // `jmp +13` over the call form (its `call r11` as LLVM left it), then `jmp end`.
    assert_eq!(first[..2], [0xeb, 0x0d]);
    assert_eq!(first[10..15], [0x41, 0xff, 0xd3, 0xeb, 64 - 15]);
    assert_eq!(first[2..10], llvm[2..10]);
    let body = first[15..].to_vec();
    assert_eq!(rt.stats().stubs, 0);
    for (shape, object, value, inline) in [(b, ob, 20, false), (a, oa, 2, true), (b, ob, 20, false)]
    {
        rt.specialize(2, Y, &[shape])?;
        let bytes = rt.code_bytes(site, 64).ok_or("no code")?;
        assert_eq!(bytes[15..], body[..], "the body changed");
        assert_eq!(bytes[10..15], first[10..15]);
        assert_eq!(bytes[..2] == [0xeb, 0x0d], inline, "{bytes:02x?}");
        assert_eq!(answer(&rt, "wide", object), Ok(value));
    }
    // Both shapes: a stub; shape 0's object misses nothing, and the body is still there.
    assert_eq!(answer(&rt, "wide", oa), Ok(2));
    let bytes = rt.code_bytes(site, 64).ok_or("no code")?;
    assert_eq!(
        (bytes[..2] == [0x49, 0xbb], &bytes[15..]),
        (true, &body[..])
    );
    Ok(())
}

/// A site patched again and again (between the stubs of different shape sets) while
/// other threads run it: with `concurrent_patching` every read gives the right value and
/// nothing faults. (With the single-thread writer, which makes the site's page read+write
/// for each patch, the first thread to run that page meanwhile dies of SIGSEGV.)
#[test]
fn threads_run_a_site_while_it_is_repatched() -> TestResult {
    const THREADS: usize = 3;
    const PATCHES: usize = 3000;
    let options = Options {
        concurrent_patching: true,
        count_hits: false,
        max_shapes: 8,
        ..Options::default()
    };
    let rt = Runtime::with_options("threads.ll", POLY_PROGRAM, options)?;
    let orders: [[u64; 3]; 4] = [[X, Y, Z], [Y, X, Z], [Z, X, Y], [X, Z, Y]];
    let shapes: Vec<ShapeId> = orders.iter().map(|o| rt.add_shape(o)).collect();
    let object = rt.new_object(shapes[0], &[1, 77, 3])?;
    // `@small` gets a stub, `@wide` its fast path for shape 0 inline (a body after its
    // call form, switched to whenever the site's cases are shape 0 alone again).
    for f in ["small", "wide"] {
        assert_eq!(answer(&rt, f, object), Ok(77));
    }
    let wide = rt.site_address(2).ok_or("no site")?;
    assert_eq!(rt.code_bytes(wide, 2), Some(vec![0xeb, 0x0d]));
    let functions: Vec<u64> = ["small", "wide"]
        .iter()
        .map(|f| rt.jit().function_address(f).ok_or("no function"))
        .collect::<Result<_, _>>()?;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let sets: [&[usize]; 4] = [&[0], &[0, 1], &[0, 1, 2], &[0, 2, 3]];
    let reads = std::thread::scope(|scope| -> Result<Vec<u64>, Box<dyn StdError>> {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (stop, functions) = (&stop, &functions);
                scope.spawn(move || {
                    let mut reads = 0u64;
                    let mut wrong = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        for f in functions {
                            // SAFETY: `@small` and `@wide` are `i64 (ptr)`; their sites
                            // answer `object` (shape 0, in every set below) from a stub
                            // without entering the runtime, whatever the main thread
                            // patches them to.
                            let read: extern "C" fn(u64) -> i64 =
                                unsafe { std::mem::transmute(*f as usize) };
                            if read(object) != 77 {
                                wrong += 1;
                            }
                            reads += 1;
                        }
                    }
                    (t, reads, wrong)
                })
            })
            .collect();
        for i in 0..PATCHES {
            let set: Vec<ShapeId> = sets[i % sets.len()].iter().map(|s| shapes[*s]).collect();
            rt.specialize(1 + (i % 2) as u64, Y, &set)?;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut counts = Vec::new();
        for worker in workers {
            let (t, reads, wrong) = worker.join().map_err(|_| "a thread panicked")?;
            assert_eq!(wrong, 0, "thread {t}");
            counts.push(reads);
        }
        Ok(counts)
    })?;
    assert!(reads.iter().all(|r| *r > 0), "{reads:?}");
    let stats = rt.stats();
    assert_eq!(stats.patches, 2 + PATCHES as u64);
    // The stubs no site calls any more were kept; with the threads gone they are freed.
    let (used, _) = rt.stub_memory();
    // SAFETY: the threads have ended; no thread runs compiled code.
    let reclaimed = unsafe { rt.reclaim_stubs() };
    assert!(reclaimed > 0);
    let (after, _) = rt.stub_memory();
    assert!(after < used && after <= 2 * 96, "{used} -> {after}");
    for f in ["small", "wide"] {
        assert_eq!(answer(&rt, f, object), Ok(77));
    }
    eprintln!(
        "{PATCHES} patches while {THREADS} threads read: {} reads, all right; {reclaimed} stubs reclaimed",
        reads.iter().sum::<u64>()
    );
    Ok(())
}

/// Misses, megamorphic lookups and repatching on several threads at once
/// (`Options::concurrent_patching`): 4 threads call `@small` and `@wide` through
/// `Runtime::call` on objects of 8 shapes (property 20 in a different word of each), so
/// the two sites miss, are patched to stubs for more and more shapes, become megamorphic
/// and answer through the lookup, all concurrently; meanwhile two of the threads keep
/// specializing the sites back to one shape (so they miss and go megamorphic again) and a
/// third keeps patching a shape's sites back to the miss handler. Every answer must be
/// the object's property. With the cross-modifying protocol replaced by the plain
/// single-thread writer, this test dies of SIGSEGV (measured: a thread runs a page made
/// writable and not executable).
#[test]
fn threads_miss_patch_and_go_megamorphic_at_the_same_sites() -> TestResult {
    const THREADS: u64 = 4;
    const READS: u64 = 20_000;
    let options = Options {
        concurrent_patching: true,
        count_hits: false,
        max_shapes: 4,
        ..Options::default()
    };
    let rt = Runtime::with_options("threads.ll", POLY_PROGRAM, options)?;
    // Shape i has i extra properties before Y (20), so Y is in word i + 1.
    let mut objects = Vec::new();
    let mut shapes = Vec::new();
    for i in 0..8u64 {
        let mut order: Vec<u64> = (0..i).map(|k| 1000 + k).collect();
        order.push(Y);
        order.push(X);
        let shape = rt.add_shape(&order);
        shapes.push(shape);
        for j in 0..3u64 {
            let value = (100 * i + j) as i64;
            let values: Vec<i64> = order
                .iter()
                .map(|n| if *n == Y { value } else { -1 })
                .collect();
            objects.push((rt.new_object(shape, &values)?, value));
        }
    }
    let sites = [
        rt.site_address(1).ok_or("no site")?,
        rt.site_address(2).ok_or("no site")?,
    ];
    // The 64-byte site gets its fast path inline: `jmp` over the call form to its body.
    assert_eq!(answer(&rt, "wide", objects[0].0), Ok(objects[0].1));
    let wide = rt.code_bytes(sites[1], 64).ok_or("no code")?;
    assert_eq!(wide[..2], [0xeb, 0x0d]);
    let (objects, shapes) = (&objects, &shapes);
    let rt = &rt;
    let results = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                scope.spawn(move || -> Result<(u64, u64, u64), String> {
                    let (mut wrong, mut megamorphic_seen, mut resets) = (0u64, 0u64, 0u64);
                    // A small LCG: each thread its own sequence of objects.
                    let mut seed = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(t + 1);
                    for n in 0..READS {
                        seed = seed
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        // In each phase of 1000 reads the threads read objects of 4 shapes
                        // together (threads 0 and 1 the first 3, 2 and 3 the last 3), so a
                        // site stays polymorphic until the phase moves on and it meets a
                        // fifth.
                        let shape = ((n / 1000) + (seed >> 33) % 3 + t / 2) % 8;
                        let (object, value) = objects[(shape * 3 + (seed >> 40) % 3) as usize];
                        let f = if n % 2 == 0 { "small" } else { "wide" };
                        if answer(rt, f, object)? != value {
                            wrong += 1;
                        }
                        if rt.is_megamorphic(sites[(n % 2) as usize]) {
                            megamorphic_seen += 1;
                        }
                        if n % 200 == 199 {
                            let shape = shapes[(seed >> 40) as usize % shapes.len()];
                            match t {
                                0 | 1 => rt
                                    .specialize(1 + t, Y, &[shape])
                                    .map_err(|e| e.to_string())?,
                                2 => {
                                    rt.invalidate_shape(shape.0).map_err(|e| e.to_string())?;
                                }
                                _ => {}
                            }
                            resets += 1;
                        }
                    }
                    Ok((wrong, megamorphic_seen, resets))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().map_err(|_| "a thread panicked".to_owned())?)
            .collect::<Result<Vec<_>, String>>()
    })?;
    let stats = rt.stats();
    for (t, (wrong, _, _)) in results.iter().enumerate() {
        assert_eq!(*wrong, 0, "thread {t}");
    }
    let seen: u64 = results.iter().map(|r| r.1).sum();
    // Misses, patches, stubs and lookups happened on the threads, at the same sites.
    assert!(stats.misses > 8 && stats.stubs > 4, "{stats:?}");
    assert!(stats.lookups > 0 && seen > 0, "{stats:?} {seen}");
    assert!(stats.patches > 40, "{stats:?}");
    let hits = THREADS * READS - stats.misses - stats.lookups;
    assert!(hits > THREADS * READS / 8, "{hits} hits");
    // SAFETY: the threads have ended.
    let reclaimed = unsafe { rt.reclaim_stubs() };
    eprintln!(
        "{THREADS} threads x {READS} reads, all right: {hits} stub hits, {} misses, {} \
         lookups, {} stubs, {} patches, {reclaimed} stubs reclaimed",
        stats.misses, stats.lookups, stats.stubs, stats.patches
    );
    // The program made without concurrent patching refuses other threads.
    let single = Runtime::with_options("single.ll", POLY_PROGRAM, Options::default())?;
    let object = single.new_object(single.add_shape(&[Y]), &[5])?;
    assert_eq!(answer(&single, "small", object), Ok(5));
    let refused = std::thread::scope(|scope| {
        scope
            .spawn(|| answer(&single, "small", object))
            .join()
            .map_err(|_| "a thread panicked".to_owned())
    })?;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("only on the thread that made the runtime")),
        "{refused:?}"
    );
    Ok(())
}

/// A language's own objects: a header word, the class word at offset 8 from the object's
/// address, fields at offsets the class table gives (negative ones too), and a computed
/// property (a slow path). The test owns the objects and the table, shared with the model.
struct Classes {
    /// Object addresses the language made.
    objects: HashSet<u64>,
    /// (class, name) -> how the property is read.
    table: std::sync::Arc<std::sync::Mutex<HashMap<(u64, u64), locus_jit::Resolution>>>,
}

/// The computed property's value: the object's address's low bits, to tell objects apart.
fn computed(object: u64) -> i64 {
    1000 + (object & 0xff) as i64
}

impl locus_jit::ObjectModel for Classes {
    fn shape_offset(&self) -> i32 {
        8
    }

    fn shape_of(&self, object: u64) -> Result<u64, String> {
        if !self.objects.contains(&object) {
            return Err(format!("{object:#x} is not one of the language's objects"));
        }
        // SAFETY: one of the objects the test made (leaked, live for the process), whose
        // class word is at +8.
        Ok(unsafe { ((object + 8) as *const u64).read() })
    }

    fn resolve(&self, shape: u64, name: u64) -> Result<locus_jit::Resolution, String> {
        self.table
            .lock()
            .map_err(|_| "the class table's lock is poisoned")?
            .get(&(shape, name))
            .copied()
            .ok_or_else(|| format!("class {shape} has no property {name}"))
    }

    fn read(&self, object: u64, shape: u64, name: u64) -> Result<i64, String> {
        match self.resolve(shape, name)? {
            locus_jit::Resolution::Slot(offset) => {
                // SAFETY: an object of the test (checked by `shape_of` just before), whose
                // class table puts this field at `offset`, inside the object's words.
                Ok(unsafe { (object.wrapping_add_signed(i64::from(offset)) as *const i64).read() })
            }
            locus_jit::Resolution::SlowPath => Ok(computed(object)),
        }
    }
}

/// The inline caches, their stubs and inline fast paths over a language's own object
/// model (`Runtime::with_model`): classes whose IDs need a 32-bit and a 64-bit immediate,
/// a field at a negative offset, a slow-path property that is never cached, a class whose
/// layout changes (`invalidate_shape` patches its sites back), and a copy of an object
/// with another class word refused by the model. The site's bytes are those
/// `encode_fast_path_in` / `encode_stub_in` give for the runtime's `layout()`.
#[test]
fn a_language_s_own_object_model_drives_the_caches() -> TestResult {
    use locus_jit::{encode_fast_path_in, encode_stub_in, Resolution};
    let table = std::sync::Arc::new(std::sync::Mutex::new(HashMap::new()));
    // Objects point at word 1 of their block: word 0 is at -8, the class word at +8.
    let make = |words: Vec<u64>| -> u64 {
        let block: &'static mut [u64] = Box::leak(words.into_boxed_slice());
        block.as_mut_ptr() as u64 + 8
    };
    const A: u64 = 7;
    const B: u64 = 70_000;
    const C: u64 = 1 << 40;
    const D: u64 = 11;
    // [-8, 0 header, +8 class, +16, +24]
    let a = make(vec![0, 0xaaaa, A, 2, 1]);
    let b = make(vec![0, 0xbbbb, B, 6, 5]);
    let c = make(vec![9, 0xcccc, C, 0, 0]);
    let d = make(vec![0, 0xdddd, D, 0, 0]);
    {
        let mut t = table.lock().map_err(|_| "poisoned")?;
        t.insert((A, Y), Resolution::Slot(16));
        t.insert((A, X), Resolution::Slot(24));
        t.insert((B, Y), Resolution::Slot(24));
        t.insert((B, X), Resolution::Slot(16));
        t.insert((C, Y), Resolution::Slot(-8));
        t.insert((D, Y), Resolution::SlowPath);
    }
    for options in [
        Options::default(),
        Options {
            inline_fast_path: false,
            ..Options::default()
        },
    ] {
        let model = Classes {
            objects: [a, b, c, d].into_iter().collect(),
            table: table.clone(),
        };
        let rt = Runtime::with_model(
            "model.ll",
            POLY_PROGRAM,
            options,
            std::sync::Arc::new(model),
        )?;
        let layout = rt.layout();
        assert!(!layout.check_objects && layout.shape_offset == 8);
        let expect = [(a, 2), (b, 5), (c, 9), (d, computed(d))];
        for round in 0..3 {
            let before = rt.stats();
            for (object, value) in expect {
                for f in ["small", "wide"] {
                    assert_eq!(answer(&rt, f, object), Ok(value), "{round} {f} {options:?}");
                }
            }
            let after = rt.stats();
            // The first round misses everywhere; then only the slow path does.
            let misses = if round == 0 { 8 } else { 2 };
            assert_eq!(after.misses - before.misses, misses, "{round}");
            assert_eq!(after.hits - before.hits, 8 - misses, "{round}");
        }
        let mut cases = vec![(A, 16), (B, 24), (C, -8)];
        cases.sort_unstable();
        let small = rt.site_address(1).ok_or("no site")?;
        let wide = rt.site_address(2).ok_or("no site")?;
        let stub = target_of(&rt.code_bytes(small, 16).ok_or("no code")?);
        let code = encode_stub_in(&layout, &cases, true).ok_or("no stub")?;
        assert_eq!(rt.code_bytes(stub, code.len()), Some(code));
        let wide_bytes = rt.code_bytes(wide, 64).ok_or("no code")?;
        match encode_fast_path_in(&layout, &cases, true, 64) {
            Some(path) if options.inline_fast_path => assert_eq!(wide_bytes, path.bytes),
            _ => assert_eq!(
                wide_bytes,
                encode_call(Arch::X86_64, target_of(&wide_bytes), 64)?
            ),
        }
        // Class A's layout changes: its two fields swap places.
        for (offset, value) in [(16, 1u64), (24, 2)] {
            // SAFETY: `a`'s words at +16 and +24, owned by the test; no compiled code runs.
            unsafe { ((a + offset) as *mut u64).write(value) };
        }
        table
            .lock()
            .map_err(|_| "poisoned")?
            .insert((A, Y), Resolution::Slot(24));
        table
            .lock()
            .map_err(|_| "poisoned")?
            .insert((A, X), Resolution::Slot(16));
        assert_eq!(rt.invalidate_shape(A)?, 2);
        for f in ["small", "wide"] {
            assert_eq!(answer(&rt, f, a), Ok(2));
            assert_eq!(answer(&rt, f, b), Ok(5));
        }
        // A copy of `b` with an unknown class word misses and is refused by the model.
        let copy = [0u64, 0xbbbb, 12_345, 6, 5];
        let forged = copy.as_ptr() as u64 + 8;
        for f in ["small", "wide"] {
            assert_eq!(
                answer(&rt, f, forged),
                Err(format!(
                    "JIT error: `{f}`: {forged:#x} is not one of the language's objects"
                ))
            );
        }
        // Back for the next options.
        for (offset, value) in [(16, 2u64), (24, 1)] {
            // SAFETY: as above.
            unsafe { ((a + offset) as *mut u64).write(value) };
        }
        table
            .lock()
            .map_err(|_| "poisoned")?
            .insert((A, Y), Resolution::Slot(16));
        table
            .lock()
            .map_err(|_| "poisoned")?
            .insert((A, X), Resolution::Slot(24));
    }
    // Megamorphic over the model: one class a site, the rest through the lookup.
    let model = Classes {
        objects: [a, b, c, d].into_iter().collect(),
        table: table.clone(),
    };
    let options = Options {
        max_shapes: 1,
        ..Options::default()
    };
    let rt = Runtime::with_model(
        "model.ll",
        POLY_PROGRAM,
        options,
        std::sync::Arc::new(model),
    )?;
    for _ in 0..2 {
        for (object, value) in [(a, 2), (b, 5), (c, 9), (d, computed(d))] {
            assert_eq!(answer(&rt, "small", object), Ok(value));
        }
    }
    assert!(rt.is_megamorphic(rt.site_address(1).ok_or("no site")?));
    // a misses (stub), b misses (megamorphic), then c, d and the second round's four.
    assert_eq!(rt.stats().lookups, 6);
    assert_eq!(rt.stats().misses, 2);
    Ok(())
}

/// The built-in shapes model is an ordinary `ObjectModel`: a `Shapes` of the test's own,
/// given to `Runtime::with_model` as a language gives its model, drives the caches as the
/// runtime's default does (the object check on, through its arena's index), its layout
/// change patches back through `invalidate_shape` as a language's would, and a copy of
/// an object is refused by the model. The program's surface uses the runtime's own
/// `Shapes` (`Runtime::shapes`), a different one.
#[test]
fn the_shapes_model_is_an_ordinary_object_model() -> TestResult {
    use locus_jit::{Layout, ObjectModel, Shapes};
    let shapes = std::sync::Arc::new(Shapes::new()?);
    let a = shapes.add_shape(&[X, Y, Z]);
    let b = shapes.add_shape(&[Y, X, Z]);
    let oa = shapes.new_object(a, &[1, 2, 3])?;
    let ob = shapes.new_object(b, &[20, 10, 30])?;
    for options in [
        Options::default(),
        Options {
            inline_fast_path: false,
            ..Options::default()
        },
    ] {
        let rt = Runtime::with_model("shapes.ll", POLY_PROGRAM, options, shapes.clone())?;
        assert_eq!(
            rt.layout(),
            Layout {
                index: shapes.arena().index(),
                check_objects: true,
                shape_offset: 0
            }
        );
        assert!(!std::sync::Arc::ptr_eq(rt.shapes(), &shapes));
        assert!(!rt.is_object(oa) && shapes.is_object(oa));
        let hits = shapes
            .arena()
            .hits()
            .load(std::sync::atomic::Ordering::Relaxed);
        for _ in 0..3 {
            for f in ["small", "wide"] {
                assert_eq!(answer(&rt, f, oa), Ok(2));
                assert_eq!(answer(&rt, f, ob), Ok(20));
            }
        }
        let stats = rt.stats();
        assert_eq!((stats.misses, stats.hits - hits), (4, 8), "{options:?}");
        // The layout of `b` changes: Y moves to the last word.
        shapes.rearrange(b, &[X, Z, Y])?;
        assert_eq!(shapes.property(ob, Y), Ok(20));
        assert_eq!(shapes.resolve(b.0, Y), Ok(locus_jit::Resolution::Slot(24)));
        assert_eq!(rt.invalidate_shape(b.0)?, 2);
        for f in ["small", "wide"] {
            assert_eq!(answer(&rt, f, ob), Ok(20));
            assert_eq!(answer(&rt, f, oa), Ok(2));
        }
        // Patched back, each site forgot both shapes: both miss once more.
        assert_eq!(rt.stats().misses, 8);
        // A copy of `oa`'s words is not in the index: the site sends it to the miss
        // handler, and the model refuses it.
        let copy = [a.0, 1, 2, 3];
        let forged = copy.as_ptr() as u64;
        for f in ["small", "wide"] {
            assert_eq!(
                answer(&rt, f, forged),
                Err(format!(
                    "JIT error: `{f}`: {forged:#x} is not an object of this runtime"
                ))
            );
        }
        // Back for the next options.
        shapes.rearrange(b, &[Y, X, Z])?;
    }
    Ok(())
}

/// `disp(%rdi)` in AT&T syntax, as the assembler reads it (no displacement for 0).
fn rdi_at(disp: i32) -> String {
    if disp == 0 {
        "(%rdi)".to_owned()
    } else {
        format!("{disp}(%rdi)")
    }
}

/// A stub or fast path for a [`Layout`] as assembly text (`fast_path_pad`: the fast
/// path with that much padding after its miss call; `None`: the stub).
fn layout_text(
    layout: &locus_jit::Layout,
    cases: &[(u64, i32)],
    count_hits: bool,
    fast_path_pad: Option<usize>,
) -> String {
    let near = layout.index.near().is_some();
    let (check, miss, hits) = header_text(layout.index, near);
    let mut text = String::new();
    if !near {
        text += &format!("movabsq ${:#x}, %r11\n", layout.index.base);
    }
    if layout.check_objects {
        // The header text's check, less its `movabs` line (written above).
        text += if near {
            &check
        } else {
            check.split_once('\n').map_or("", |(_, rest)| rest)
        };
    }
    let shape_at = rdi_at(layout.shape_offset);
    let hit = |offset: i32| {
        let count = if count_hits {
            format!("incq {hits}\n")
        } else {
            String::new()
        };
        format!("{count}movq {}, %rax\n", rdi_at(offset))
    };
    match fast_path_pad {
        None => {
            for (i, (shape, offset)) in cases.iter().enumerate() {
                let shape = *shape as i64;
                if i32::try_from(shape).is_ok() {
                    text += &format!("cmpq ${shape}, {shape_at}\n");
                } else {
                    text += &format!("movabsq ${shape}, %rax\ncmpq %rax, {shape_at}\n");
                }
                text += &format!("jne .Lnext{i}\n{}retq\n.Lnext{i}:\n", hit(*offset));
            }
            text += &format!(".Lmiss:\njmpq *{miss}\n");
        }
        Some(pad) => {
            for (i, (shape, _)) in cases.iter().enumerate() {
                text += &format!("cmpq ${}, {shape_at}\nje .Lcase{i}\n", *shape as i64);
            }
            text += &format!(".Lmiss:\ncallq *{miss}\n");
            for byte in locus_stackmap::patch::encode_nops(Arch::X86_64, pad).unwrap_or_default() {
                text += &format!(".byte {byte:#x}\n");
            }
            for (i, (_, offset)) in cases.iter().enumerate() {
                text += &format!(".Lcase{i}:\n{}", hit(*offset));
                if i + 1 < cases.len() {
                    text += "jmp .Lend\n";
                }
            }
            text += ".Lend:\n";
        }
    }
    text
}

/// Stubs and fast paths for other object layouts (a language's model: shape word at
/// another offset, no object check, fields at any offset) are the bytes `llvm-mc-19`
/// assembles.
#[test]
fn layout_encodings_match_llvm_mc() -> TestResult {
    use locus_jit::{encode_fast_path_in, encode_stub_in, Layout};
    let index = ObjectIndex {
        base: 0x7f12_3456_1000,
        mask: (1 << 28) - 8,
    };
    let layouts = [
        Layout {
            index,
            check_objects: false,
            shape_offset: 8,
        },
        Layout {
            index,
            check_objects: true,
            shape_offset: -16,
        },
        Layout {
            index,
            check_objects: false,
            shape_offset: 0x1000,
        },
        Layout {
            index,
            check_objects: false,
            shape_offset: 0,
        },
        // The short form: an index in the low 2 GiB.
        Layout {
            index: INDEXES[2],
            check_objects: false,
            shape_offset: 8,
        },
        Layout {
            index: INDEXES[2],
            check_objects: true,
            shape_offset: -16,
        },
    ];
    let case_sets: [&[(u64, i32)]; 4] = [
        &[(3, 0)],
        &[(1, -8), (200, 127), (70_000, 128)],
        &[(5, -0x2000), (6, 0x7fff_fff0)],
        &[(1 << 40, 16), (u64::MAX, 24)],
    ];
    // Every text first (the stub, the bare fast path, the padded one), assembled in one
    // run; then the checks.
    let extra = 3;
    let mut texts = Vec::new();
    let mut plan = Vec::new();
    for layout in &layouts {
        for cases in case_sets {
            for count_hits in [false, true] {
                plan.push((layout, cases, count_hits, texts.len()));
                texts.push(layout_text(layout, cases, count_hits, None));
                if cases.iter().all(|(s, _)| i32::try_from(*s as i64).is_ok()) {
                    texts.push(layout_text(layout, cases, count_hits, Some(0)));
                    texts.push(layout_text(layout, cases, count_hits, Some(extra)));
                }
            }
        }
    }
    let assembled = assemble_all(&texts)?;
    let mut checked = 0;
    for (layout, cases, count_hits, at) in plan {
        let stub = encode_stub_in(layout, cases, count_hits).ok_or("no stub")?;
        assert_eq!(stub, assembled[at], "{layout:?} {cases:?} {count_hits}");
        checked += 1;
        if cases.iter().any(|(s, _)| i32::try_from(*s as i64).is_err()) {
            // No fast path for a shape outside i32.
            assert!(encode_fast_path_in(layout, cases, count_hits, 200).is_none());
            continue;
        }
        let bare = &assembled[at + 1];
        let path = encode_fast_path_in(layout, cases, count_hits, bare.len() + extra)
            .ok_or("no fast path")?;
        assert_eq!(
            path.bytes,
            assembled[at + 2],
            "{layout:?} {cases:?} {count_hits} {extra}"
        );
        checked += 1;
    }
    assert_eq!(checked, (32 + 24) / 4 * 6);
    Ok(())
}

/// The bytes `llvm-mc-19` assembles `text` to for `triple` (the `.text` section).
fn assemble_for(triple: &str, text: &str) -> Result<Vec<u8>, Box<dyn StdError>> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let stem = std::env::temp_dir().join(format!(
        "locus-stub-{}-{}",
        std::process::id(),
        text.len() ^ (text.as_ptr() as usize)
    ));
    let (object, binary) = (stem.with_extension("o"), stem.with_extension("bin"));
    let mut mc = Command::new("llvm-mc-19")
        .arg(format!("-triple={triple}"))
        .args(["-filetype=obj", "-o"])
        .arg(&object)
        .stdin(Stdio::piped())
        .spawn()?;
    mc.stdin
        .take()
        .ok_or("no stdin")?
        .write_all(text.as_bytes())?;
    assert!(mc.wait()?.success(), "llvm-mc-19 failed on:\n{text}");
    let status = Command::new("llvm-objcopy-19")
        .args(["-O", "binary", "--only-section=.text"])
        .arg(&object)
        .arg(&binary)
        .status()?;
    assert!(status.success());
    let bytes = std::fs::read(&binary)?;
    let _ = std::fs::remove_file(&object);
    let _ = std::fs::remove_file(&binary);
    Ok(bytes)
}

/// `movz`/`movk` text putting `value` in `reg` (zero halfwords after the first skipped),
/// as the encoder writes it.
fn aarch64_mov(reg: &str, value: u64) -> String {
    let mut text = format!("movz {reg}, #{}\n", value & 0xffff);
    for hw in 1..4 {
        let half = (value >> (16 * hw)) & 0xffff;
        if half != 0 {
            text += &format!("movk {reg}, #{half}, lsl #{}\n", 16 * hw);
        }
    }
    text
}

/// `ldr rt, [rn, #offset]` as the encoder picks its form.
fn aarch64_load(rt: &str, rn: &str, offset: i32) -> String {
    if offset >= 0 && offset % 8 == 0 && offset / 8 < 4096 {
        format!("ldr {rt}, [{rn}, #{offset}]\n")
    } else if (-256..=255).contains(&offset) {
        format!("ldur {rt}, [{rn}, #{offset}]\n")
    } else {
        format!(
            "{}ldr {rt}, [{rn}, x9]\n",
            aarch64_mov("x9", i64::from(offset) as u64)
        )
    }
}

/// An AArch64 stub as assembly text.
fn aarch64_stub_text(layout: &locus_jit::Layout, cases: &[(u64, i32)], count_hits: bool) -> String {
    let mut text = aarch64_mov("x16", layout.index.base);
    if layout.check_objects {
        text += &format!(
            "and x17, x0, #{:#x}\nldr x17, [x16, x17]\ncmp x17, x0\nb.ne .Lmiss\n",
            layout.index.mask
        );
    }
    text += &aarch64_load("x17", "x0", layout.shape_offset);
    for (i, (shape, offset)) in cases.iter().enumerate() {
        if *shape < 4096 {
            text += &format!("cmp x17, #{shape}\n");
        } else {
            text += &aarch64_mov("x9", *shape);
            text += "cmp x17, x9\n";
        }
        text += &format!("b.ne .Lnext{i}\n");
        if count_hits {
            text += "ldur x9, [x16, #-8]\nadd x9, x9, #1\nstur x9, [x16, #-8]\n";
        }
        text += &aarch64_load("x0", "x0", *offset);
        text += &format!("ret\n.Lnext{i}:\n");
    }
    text += ".Lmiss:\nldur x16, [x16, #-16]\nbr x16\n";
    text
}

/// An AArch64 inline fast path as assembly text, `pad` nops after the miss.
fn aarch64_fast_path_text(
    layout: &locus_jit::Layout,
    cases: &[(u64, i32)],
    count_hits: bool,
    pad: usize,
) -> String {
    let mut text = aarch64_mov("x16", layout.index.base);
    if layout.check_objects {
        text += &format!(
            "and x17, x0, #{:#x}\nldr x17, [x16, x17]\ncmp x17, x0\nb.ne .Lmiss\n",
            layout.index.mask
        );
    }
    text += &aarch64_load("x17", "x0", layout.shape_offset);
    for (i, (shape, _)) in cases.iter().enumerate() {
        if *shape < 4096 {
            text += &format!("cmp x17, #{shape}\n");
        } else {
            text += &aarch64_mov("x9", *shape);
            text += "cmp x17, x9\n";
        }
        text += &format!("b.eq .Lcase{i}\n");
    }
    text += ".Lmiss:\nldur x16, [x16, #-16]\nblr x16\nb .Lend\n";
    text += &"nop\n".repeat(pad);
    for (i, (_, offset)) in cases.iter().enumerate() {
        text += &format!(".Lcase{i}:\n");
        if count_hits {
            text += "ldur x9, [x16, #-8]\nadd x9, x9, #1\nstur x9, [x16, #-8]\n";
        }
        text += &aarch64_load("x0", "x0", *offset);
        if i + 1 < cases.len() {
            text += "b .Lend\n";
        }
    }
    text += ".Lend:\n";
    text
}

/// AArch64 stubs and inline fast paths (issue 28 §3): the bytes `llvm-mc-19` assembles
/// for every layout and case set, and run under `qemu-aarch64-static` in a freestanding C
/// harness: hits give the object's property, other shapes, forged objects and null reach
/// the miss handler (from a stub a tail call; from a fast path a call, then a branch to
/// the site's end), hits are counted.
#[test]
fn aarch64_stubs_match_llvm_mc_and_run_under_qemu() -> TestResult {
    use locus_jit::{encode_fast_path_aarch64, encode_stub_aarch64, Layout};
    let index = ObjectIndex {
        base: 0x7f12_3456_1000,
        mask: (1 << 28) - 8,
    };
    let layouts = [
        Layout::shapes(index),
        Layout {
            index,
            check_objects: false,
            shape_offset: 8,
        },
        Layout {
            index: ObjectIndex {
                base: 0xffff_0000_1234_5678,
                mask: 120,
            },
            check_objects: true,
            shape_offset: -300,
        },
    ];
    let case_sets: [&[(u64, i32)]; 3] = [
        &[(0, 8)],
        &[(1, -8), (4095, 32760), (4096, 32768), (1 << 40, -0x2000)],
        &[(0x1234_5678_9abc_def0, 255), (7, 0)],
    ];
    let mut checked = 0;
    for layout in &layouts {
        for cases in case_sets {
            for count_hits in [false, true] {
                let expected = assemble_for(
                    "aarch64-linux-gnu",
                    &aarch64_stub_text(layout, cases, count_hits),
                )?;
                let stub = encode_stub_aarch64(layout, cases, count_hits).ok_or("no stub")?;
                assert_eq!(stub, expected, "{layout:?} {cases:?} {count_hits}");
                checked += 1;
                let pad = 3;
                let expected = assemble_for(
                    "aarch64-linux-gnu",
                    &aarch64_fast_path_text(layout, cases, count_hits, pad),
                )?;
                let path = encode_fast_path_aarch64(layout, cases, count_hits, expected.len())
                    .ok_or("no fast path")?;
                assert_eq!(path.bytes, expected, "{layout:?} {cases:?} {count_hits}");
                // The miss returns to the `b .Lend` after the `blr`.
                assert_eq!(
                    expected[path.miss_return - 4..path.miss_return],
                    [0x00, 0x02, 0x3f, 0xd6]
                );
                let fits = |r| encode_fast_path_aarch64(layout, cases, count_hits, r).is_some();
                assert!(!fits(expected.len() - 4 * (pad + 1)) && !fits(expected.len() + 2));
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 36);
    // A mask that is not a run of ones: none.
    let odd = Layout {
        index: ObjectIndex {
            base: 0x1000,
            mask: 0b1010_1000,
        },
        check_objects: true,
        shape_offset: 0,
    };
    assert!(encode_stub_aarch64(&odd, &[(1, 8)], false).is_none());
    run_aarch64_harness()
}

/// The harness for [`aarch64_stubs_match_llvm_mc_and_run_under_qemu`]: a header (miss
/// handler, hit counter) before a 16-word index, objects, and two stubs (`stub_a`: the
/// runtime's layout, 3 cases, counting hits; `stub_b`: a language's layout, class word at
/// +8, no object check) whose bytes the test writes into `stubs.s`.
const AARCH64_HARNESS: &str = r#"
typedef unsigned long u64;
typedef long i64;

static i64 sys(i64 n, i64 a, i64 b, i64 c) {
  register i64 x8 __asm__("x8") = n;
  register i64 x0 __asm__("x0") = a;
  register i64 x1 __asm__("x1") = b;
  register i64 x2 __asm__("x2") = c;
  __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
  return x0;
}

struct header { u64 miss; u64 hits; u64 index[16]; };
struct header hdr __attribute__((aligned(128)));
u64 objs[16] __attribute__((aligned(128))) = {
  1, 11, 12, 13,  2, 21, 22, 23,  5000, 31, 32, 33,  3, 41, 42, 43 };
u64 copy[4] = { 1, 11, 12, 13 };
u64 big[5010];
u64 small[4];
static i64 misses;

i64 miss(i64 object, i64 name) { (void)object; (void)name; misses++; return -1; }

extern unsigned char stub_a[], stub_b[], fp_a[];
typedef i64 (*stub_fn)(i64, i64);

static char buf[1024];
static int len;
static void put(i64 v) {
  char tmp[24]; int n = 0; u64 u = v < 0 ? -(u64)v : (u64)v;
  do { tmp[n++] = '0' + u % 10; u /= 10; } while (u);
  if (v < 0) buf[len++] = '-';
  while (n) buf[len++] = tmp[--n];
  buf[len++] = '\n';
}

void _start(void) {
  hdr.miss = (u64)&miss;
  for (int i = 0; i < 16; i++) hdr.index[i] = 0;
  for (int i = 0; i < 16; i += 4) hdr.index[(((u64)&objs[i]) & 120) / 8] = (u64)&objs[i];
  /* stub_b's objects: p = &big[1]: class at +8, fields at -8 and +40000 */
  big[2] = 7; big[0] = 70;
  small[2] = 1ul << 40; small[1] = 0;
  u64 far = (u64)&big[1];
  big[1 + 5000] = 0;
  stub_fn a = (stub_fn)stub_a, b = (stub_fn)stub_b;
  for (int r = 0; r < 4; r++) {
    if (r == 2) a = (stub_fn)fp_a;
    put(a((i64)&objs[0], 0));
    put(a((i64)&objs[4], 0));
    put(a((i64)&objs[8], 0));
    put(a((i64)&objs[12], 0));
    put(a((i64)copy, 0));
    put(a(0, 0));
    put(a((i64)&objs[1], 0));
  }
  put(b((i64)far, 0));
  big[2] = 1ul << 40; big[1 + 5000] = 99;
  put(b((i64)far, 0));
  big[2] = 9;
  put(b((i64)far, 0));
  put(misses);
  put(hdr.hits);
  sys(64, 1, (i64)buf, len);
  sys(93, 0, 0, 0);
  for (;;) {}
}
"#;

fn run_aarch64_harness() -> TestResult {
    use locus_jit::{encode_fast_path_aarch64, encode_stub_aarch64, Layout};
    use std::process::Command;
    let dir = std::env::temp_dir().join(format!("locus-stub-aarch64-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let c = dir.join("harness.c");
    std::fs::write(&c, AARCH64_HARNESS)?;
    let object = dir.join("harness.o");
    let status = Command::new("clang-19")
        .args([
            "--target=aarch64-linux-gnu",
            "-O1",
            "-ffreestanding",
            "-fno-builtin",
            "-nostdlib",
            "-c",
        ])
        .arg(&c)
        .arg("-o")
        .arg(&object)
        .status()?;
    assert!(status.success());
    const SIZE: usize = 256;
    // Links the harness with stubs of `bytes` (each padded to SIZE); returns the
    // executable and the symbols the stubs need.
    let link = |a: &[u8],
                b: &[u8],
                c: &[u8]|
     -> Result<(std::path::PathBuf, u64, u64), Box<dyn StdError>> {
        let mut s = String::from(".section .text.stubs,\"ax\",@progbits\n.balign 16\n");
        for (name, bytes) in [("stub_a", a), ("stub_b", b), ("fp_a", c)] {
            assert!(bytes.len() + 12 <= SIZE);
            s += &format!(".globl {name}\n{name}:\n");
            let mut padded = bytes.to_vec();
            // A fast path is the body of a site in a function that saved its link
            // register (the miss call clobbers it): `stp x29, x30, [sp, #-16]!` before,
            // `ldp x29, x30, [sp], #16; ret` after make it one.
            if name == "fp_a" {
                padded = 0xa9bf_7bfdu32.to_le_bytes().to_vec();
                padded.extend_from_slice(bytes);
                for word in [0xa8c1_7bfdu32, 0xd65f_03c0] {
                    padded.extend_from_slice(&word.to_le_bytes());
                }
            }
            padded.resize(SIZE, 0);
            for byte in padded {
                s += &format!(".byte {byte}\n");
            }
        }
        let stubs_s = dir.join("stubs.s");
        std::fs::write(&stubs_s, s)?;
        let stubs_o = dir.join("stubs.o");
        let ok = Command::new("llvm-mc-19")
            .args(["-triple=aarch64-linux-gnu", "-filetype=obj", "-o"])
            .arg(&stubs_o)
            .arg(&stubs_s)
            .status()?
            .success();
        assert!(ok);
        let exe = dir.join("harness");
        let ok = Command::new("ld.lld-19")
            .arg("-static")
            .arg(&object)
            .arg(&stubs_o)
            .arg("-o")
            .arg(&exe)
            .status()?
            .success();
        assert!(ok);
        let nm = Command::new("llvm-nm-19").arg(&exe).output()?;
        let symbols = String::from_utf8(nm.stdout)?;
        let address = |name: &str| -> Result<u64, Box<dyn StdError>> {
            let line = symbols
                .lines()
                .find(|l| l.ends_with(&format!(" {name}")))
                .ok_or_else(|| format!("no {name}"))?;
            Ok(u64::from_str_radix(
                line.split(' ').next().unwrap_or(""),
                16,
            )?)
        };
        Ok((exe.clone(), address("hdr")?, address("stub_a")?))
    };
    let (_, hdr, stub_a) = link(&[], &[], &[])?;
    let index = ObjectIndex {
        base: hdr + 16,
        mask: 120,
    };
    let a = encode_stub_aarch64(&Layout::shapes(index), &[(1, 8), (2, 16), (5000, 24)], true)
        .ok_or("no stub a")?;
    let b = encode_stub_aarch64(
        &Layout {
            index,
            check_objects: false,
            shape_offset: 8,
        },
        &[(7, -8), (1 << 40, 40_000)],
        false,
    )
    .ok_or("no stub b")?;
    // The same cases as a fast path in a site of 128 bytes (124 and a nop after the miss).
    let c = encode_fast_path_aarch64(
        &Layout::shapes(index),
        &[(1, 8), (2, 16), (5000, 24)],
        true,
        128,
    )
    .ok_or("no fast path")?;
    let (exe, hdr_again, stub_a_again) = link(&a, &b, &c.bytes)?;
    assert_eq!((hdr_again, stub_a_again), (hdr, stub_a));
    let out = Command::new("timeout")
        .args(["20", "qemu-aarch64-static"])
        .arg(&exe)
        .output()?;
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<i64> = String::from_utf8(out.stdout)?
        .lines()
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    // Twice through stub_a, twice through the fast path: the three cases' slots, then
    // another shape, a copy, null and an address inside an object miss; then stub_b:
    // class 7's field at -8, the 64-bit class's at +40000, class 9 misses; 16 + 1
    // misses; 12 hits counted (stub_b does not count).
    let round = [11, 22, 33, -1, -1, -1, -1];
    let mut expected: Vec<i64> = round
        .iter()
        .cycle()
        .take(4 * round.len())
        .copied()
        .collect();
    expected.extend([70, 99, -1, 17, 12]);
    assert_eq!(lines, expected);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The environment variable that makes this binary a child running one fault case
/// (`report` or `quiet`), since a fault ends the process.
const FAULT_CHILD: &str = "LOCUS_JIT_FAULT_CHILD";

/// A program whose `read` loads through the pointer it is given.
const FAULT_PROGRAM: &str = "define i64 @read(ptr %p) {\n  \
                             %v = load volatile i64, ptr %p\n  ret i64 %v\n}\n";

/// With `Options::report_faults`, a function of the program that reads through null ends
/// the process with one `locus:` line naming SIGSEGV, address 0 and the function (from the
/// runtime's registration: JIT code has no symbol `dladdr` knows), status 3; without it
/// the child dies by SIGSEGV with no line. A call that does not fault returns its value.
#[test]
fn a_fault_in_a_call_is_one_line_naming_the_function() -> TestResult {
    use fault_child::locus_lines;
    const NAME: &str = "a_fault_in_a_call_is_one_line_naming_the_function";
    if let Ok(mode) = std::env::var(FAULT_CHILD) {
        let options = Options {
            report_faults: mode == "report",
            ..Options::default()
        };
        let rt = Runtime::with_options("fault.ll", FAULT_PROGRAM, options)?;
        let word = 42u64;
        // SAFETY: `read` takes one pointer, here to a live word.
        let v = unsafe { rt.call("read", &[&word as *const u64 as u64])? };
        println!("read {v}");
        // SAFETY: none: the fault is the test.
        let _ = unsafe { rt.call("read", &[0]) };
        std::process::exit(0);
    }
    let child = |mode: &str| fault_child::run(NAME, FAULT_CHILD, mode);
    let out = child("report")?;
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("read 42"),
        "{out:?}"
    );
    let lines = locus_lines(&out);
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(
        lines[0].starts_with("locus: SIGSEGV (null pointer dereference) at address 0x0")
            && lines[0].contains(" in function `read` (JIT-compiled code, pc 0x"),
        "{}",
        lines[0]
    );
    let out = child("quiet")?;
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(libc::SIGSEGV),
        "{out:?}"
    );
    assert!(locus_lines(&out).is_empty(), "{out:?}");
    Ok(())
}
