//! Control-flow graphs and dominators checked against LLVM's own: immediate dominators
//! against `opt-19 -passes='print<domtree>'` (fixtures and random CFGs), predecessors
//! against LLVM's verifier (a `phi` with one entry per predecessor edge must pass it),
//! dominance and frontiers against their definitions, and instruction dominance against
//! every use in modules the verifier accepts.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use locus_llvm::builder::Builder;
use locus_llvm::cfg::{Cfg, Dominators};
use locus_llvm::ir::{Function, Instruction, Opcode, Use};
use locus_llvm::{Context, Module};

const CFG: &str = include_str!("../../fixtures/cfg.ll");
const IR_WALK: &str = include_str!("../../fixtures/ir_walk.ll");

/// A fresh path in the temporary directory.
fn temp_path(tag: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!(
        "locus-llvm-cfg-{tag}-{}-{n}.ll",
        std::process::id()
    ))
}

/// Runs `opt-19 args... FILE` on `text`; returns (success, stdout, stderr).
fn opt(args: &[&str], text: &str) -> (bool, String, String) {
    let path = temp_path("opt");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    let out = Command::new("opt-19").args(args).arg(&path).output();
    let _ = std::fs::remove_file(&path);
    let out = out.unwrap_or_else(|e| {
        panic!("cannot run opt-19 ({e}): install LLVM 19's tools (scripts/install-deps)")
    });
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn opt_verify(module: &Module<'_>) {
    let text = module.print();
    let (ok, _, stderr) = opt(&["-passes=verify", "-disable-output"], &text);
    assert!(
        ok,
        "opt-19 -passes=verify rejected the module:\n{stderr}\n{text}"
    );
}

/// Immediate dominators by block name, per function, as `opt-19 -passes='print<domtree>'`
/// prints them (on stderr): `[level] %name {...} [parent level]`, indented by depth.
/// Blocks absent from the tree (unreachable ones) are absent from the map.
fn llvm_idoms(text: &str) -> HashMap<String, HashMap<String, Option<String>>> {
    let (ok, _, stderr) = opt(&["-passes=print<domtree>", "-disable-output"], text);
    assert!(ok, "opt-19 failed:\n{stderr}");
    let mut out: HashMap<String, HashMap<String, Option<String>>> = HashMap::new();
    let mut current = String::new();
    let mut stack: Vec<String> = Vec::new();
    for line in stderr.lines() {
        if let Some(name) = line.strip_prefix("DominatorTree for function: ") {
            current = name.trim().to_owned();
            out.entry(current.clone()).or_default();
            stack.clear();
            continue;
        }
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix('[') else {
            continue;
        };
        let Some((level, rest)) = rest.split_once(']') else {
            continue;
        };
        let Ok(level) = level.parse::<usize>() else {
            continue;
        };
        let Some(name) = rest.trim_start().strip_prefix('%') else {
            continue;
        };
        let name = name.split_whitespace().next().unwrap_or("").to_owned();
        stack.truncate(level - 1);
        let parent = stack.last().cloned();
        out.entry(current.clone())
            .or_default()
            .insert(name.clone(), parent);
        stack.push(name);
    }
    out
}

/// Our immediate dominators by block name (reachable blocks only).
fn our_idoms(f: Function<'_>) -> HashMap<String, Option<String>> {
    let cfg = Cfg::new(f);
    let dom = Dominators::new(&cfg);
    let name = |i: usize| cfg.block(i).map(|b| b.name()).unwrap_or_default();
    cfg.reverse_post_order()
        .iter()
        .map(|&b| (name(b), dom.immediate_dominator(b).map(name)))
        .collect()
}

fn check_against_llvm(module: &Module<'_>, text: &str) -> usize {
    let llvm = llvm_idoms(text);
    let mut checked = 0;
    for f in module.function_list() {
        if f.is_declaration() {
            continue;
        }
        let expected = llvm
            .get(&f.name())
            .unwrap_or_else(|| panic!("opt printed no tree for @{}", f.name()));
        assert_eq!(
            &our_idoms(f),
            expected,
            "immediate dominators of @{}",
            f.name()
        );
        checked += 1;
    }
    checked
}

#[test]
fn fixture_dominators_match_llvm() {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "cfg.ll", CFG).unwrap();
    assert_eq!(check_against_llvm(&module, CFG), 8);
}

fn block_index(cfg: &Cfg<'_>, name: &str) -> usize {
    cfg.blocks()
        .iter()
        .position(|b| b.name() == name)
        .unwrap_or_else(|| panic!("no block %{name}"))
}

#[test]
fn fixture_shapes() {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "cfg.ll", CFG).unwrap();

    // Diamond.
    let cfg = Cfg::new(module.function("diamond").unwrap());
    let [entry, a, b, join] = ["entry", "a", "b", "join"].map(|n| block_index(&cfg, n));
    assert_eq!(cfg.successors(entry), &[a, b]);
    assert_eq!(cfg.predecessors(join), &[a, b]);
    let dom = Dominators::new(&cfg);
    assert_eq!(dom.immediate_dominator(join), Some(entry));
    assert_eq!(dom.immediate_dominator(entry), None);
    assert!(dom.dominates(entry, join) && dom.dominates(join, join));
    assert!(!dom.dominates(a, join) && !dom.strictly_dominates(join, join));
    assert_eq!(dom.frontier(a), &[join]);
    assert_eq!(dom.frontier(b), &[join]);
    assert!(dom.frontier(entry).is_empty());
    assert_eq!(dom.children(entry), &[a, b, join]);
    assert_eq!(dom.nearest_common_dominator(a, b), Some(entry));
    assert_eq!(cfg.reverse_post_order()[0], entry);
    assert_eq!(*cfg.post_order().last().unwrap(), entry);

    // Unreachable blocks: listed, no immediate dominator, dominated by everything.
    let cfg = Cfg::new(module.function("unreachable_blocks").unwrap());
    let [a, dead1, dead2, exit, orphan] =
        ["a", "dead1", "dead2", "exit", "orphan"].map(|n| block_index(&cfg, n));
    assert_eq!(cfg.unreachable_blocks(), vec![dead1, dead2, orphan]);
    // `a` has itself, the entry and an unreachable block as predecessors.
    assert_eq!(cfg.predecessors(a), &[0, a, dead2]);
    let dom = Dominators::new(&cfg);
    assert_eq!(dom.immediate_dominator(dead1), None);
    assert!(dom.dominates(exit, dead1));
    assert!(!dom.dominates(dead1, exit));
    assert!(dom.frontier(dead1).is_empty());
    assert_eq!(dom.nearest_common_dominator(a, dead2), None);

    // Switch: the two cases to %c1 are one successor, two edges.
    let cfg = Cfg::new(module.function("switch").unwrap());
    let [entry, c0, c1, default, join] =
        ["entry", "c0", "c1", "default", "join"].map(|n| block_index(&cfg, n));
    assert_eq!(cfg.successors(entry), &[default, c0, c1, join]);
    assert_eq!(cfg.edge_count(entry, c1), 2);
    assert_eq!(cfg.predecessors(c0), &[entry, c1]);
    let dom = Dominators::new(&cfg);
    assert!(
        !dom.edge_dominates(entry, c1, c1),
        "two edges dominate nothing"
    );
    assert!(dom.edge_dominates(entry, default, default));
}

/// Brute force: `a` dominates `b` iff `b` is unreachable from the entry once `a` is
/// removed (for reachable `a != b`).
fn brute_dominates(cfg: &Cfg<'_>, a: usize, b: usize) -> bool {
    if a == b || !cfg.is_reachable(b) {
        return true;
    }
    if !cfg.is_reachable(a) || a == 0 {
        return a == 0;
    }
    let mut seen = vec![false; cfg.len()];
    let mut queue = VecDeque::from([0usize]);
    seen[0] = true;
    while let Some(x) = queue.pop_front() {
        for &s in cfg.successors(x) {
            if s != a && !seen[s] {
                seen[s] = true;
                queue.push_back(s);
            }
        }
    }
    !seen[b]
}

/// A deterministic pseudo-random generator (64-bit LCG, high bits).
struct Rng(u64);

impl Rng {
    fn next(&mut self, bound: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % bound as u64) as usize
    }
}

/// A module of `count` functions with random CFGs (branches, conditional branches,
/// switches with repeated targets, returns), no edges into the entry block.
fn random_module(seed: u64, count: usize) -> String {
    let mut rng = Rng(seed);
    let mut text = String::new();
    for f in 0..count {
        let n = 2 + rng.next(30);
        let _ = writeln!(text, "define void @f{f}(i1 %c, i32 %s) {{");
        for b in 0..n {
            let _ = writeln!(text, "b{b}:");
            let target = |rng: &mut Rng| 1 + rng.next(n - 1);
            match rng.next(10) {
                0 => {
                    let _ = writeln!(text, "  ret void");
                }
                1..=3 => {
                    let _ = writeln!(text, "  br label %b{}", target(&mut rng));
                }
                4..=6 => {
                    let (x, y) = (target(&mut rng), target(&mut rng));
                    let _ = writeln!(text, "  br i1 %c, label %b{x}, label %b{y}");
                }
                _ => {
                    let default = target(&mut rng);
                    let _ = write!(text, "  switch i32 %s, label %b{default} [");
                    for case in 0..1 + rng.next(4) {
                        let _ = write!(text, " i32 {case}, label %b{}", target(&mut rng));
                    }
                    let _ = writeln!(text, " ]");
                }
            }
        }
        let _ = writeln!(text, "}}\n");
    }
    text
}

#[test]
fn random_cfgs_match_llvm_and_definitions() {
    let ctx = Context::new();
    for seed in [1, 2, 3] {
        let text = random_module(seed, 60);
        let module = Module::parse_ir(&ctx, "random.ll", &text).unwrap();
        module.verify().unwrap();
        assert_eq!(check_against_llvm(&module, &text), 60);

        for f in module.function_list() {
            let cfg = Cfg::new(f);
            let dom = Dominators::new(&cfg);
            let n = cfg.len();
            // Predecessors are the inverted successors of the IR itself.
            for b in 0..n {
                let mut expected: Vec<usize> = (0..n)
                    .filter(|&p| {
                        cfg.block(p)
                            .unwrap()
                            .successors()
                            .contains(&cfg.block(b).unwrap())
                    })
                    .collect();
                expected.dedup();
                assert_eq!(
                    cfg.predecessors(b),
                    expected.as_slice(),
                    "@{} b{b}",
                    f.name()
                );
            }
            // Reverse post-order: entry first, each block after some predecessor, and
            // exactly the reachable blocks.
            let rpo = cfg.reverse_post_order();
            assert_eq!(rpo.first(), Some(&0));
            let pos: HashMap<usize, usize> = rpo.iter().enumerate().map(|(i, &b)| (b, i)).collect();
            for &b in &rpo[1..] {
                assert!(cfg.predecessors(b).iter().any(|p| pos.get(p) < pos.get(&b)));
                let idom = dom.immediate_dominator(b).unwrap();
                assert!(pos[&idom] < pos[&b]);
            }
            for b in 0..n {
                assert_eq!(cfg.is_reachable(b), pos.contains_key(&b));
            }
            // Dominance and frontiers by definition.
            for a in 0..n {
                for b in 0..n {
                    assert_eq!(
                        dom.dominates(a, b),
                        brute_dominates(&cfg, a, b),
                        "@{} {a} {b}",
                        f.name()
                    );
                }
                if !cfg.is_reachable(a) {
                    continue;
                }
                let expected: Vec<usize> = (0..n)
                    .filter(|&y| {
                        cfg.is_reachable(y)
                            && !dom.strictly_dominates(a, y)
                            && cfg
                                .predecessors(y)
                                .iter()
                                .any(|&p| cfg.is_reachable(p) && dom.dominates(a, p))
                    })
                    .collect();
                assert_eq!(
                    dom.frontier(a),
                    expected.as_slice(),
                    "frontier of {a} in @{}",
                    f.name()
                );
            }
        }
    }
}

/// Predecessors checked by LLVM's verifier: a `phi` built in every block with one entry
/// per predecessor edge must be exactly what LLVM expects.
#[test]
fn predecessors_satisfy_llvm_phi_rules() {
    let ctx = Context::new();
    let text = random_module(7, 40);
    let module = Module::parse_ir(&ctx, "random.ll", &text).unwrap();
    let b = Builder::new(&module);
    let i32_ty = b.int_type(32).unwrap();
    let mut phis = 0;
    for f in module.function_list() {
        let cfg = Cfg::new(f);
        for (index, &block) in cfg.blocks().iter().enumerate() {
            if cfg.predecessors(index).is_empty() {
                continue;
            }
            b.position_at_start(block).unwrap();
            let phi = b.phi(i32_ty, "p").unwrap();
            for &p in cfg.predecessors(index) {
                let value = b.const_int(i32_ty, p as i64).unwrap();
                for _ in 0..cfg.edge_count(p, index) {
                    b.add_incoming(phi, value, cfg.block(p).unwrap()).unwrap();
                }
            }
            phis += 1;
        }
    }
    assert!(phis > 100);
    module.verify().unwrap();
    opt_verify(&module);
}

#[test]
fn deep_cfg_does_not_overflow() {
    // A chain of 100 000 blocks, each also branching back a few blocks: the depth of the
    // DFS and of the dominator tree equals the number of blocks.
    const N: usize = 100_000;
    let mut text = String::from("define void @deep(i1 %c) {\nb0:\n  br label %b1\n");
    for i in 1..N - 1 {
        let back = i.saturating_sub(3).max(1);
        writeln!(text, "b{i}:\n  br i1 %c, label %b{}, label %b{back}", i + 1).unwrap();
    }
    writeln!(text, "b{}:\n  ret void\n}}", N - 1).unwrap();
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "deep.ll", &text).unwrap();
    let cfg = Cfg::new(module.function("deep").unwrap());
    assert_eq!(cfg.len(), N);
    let dom = Dominators::new(&cfg);
    for i in 1..N {
        assert_eq!(dom.immediate_dominator(i), Some(i - 1));
    }
    assert!(dom.dominates(0, N - 1) && dom.dominates(N / 2, N - 1));
    assert!(!dom.dominates(N - 1, N / 2));
    assert_eq!(cfg.post_order().len(), N);
}

/// Every use in a module the verifier accepts is dominated by its definition.
fn all_uses_dominated(module: &Module<'_>) -> usize {
    let mut checked = 0;
    for f in module.function_list() {
        let cfg = Cfg::new(f);
        let dom = Dominators::new(&cfg);
        for inst in f.instructions() {
            for u in inst.uses() {
                assert!(
                    dom.dominates_use(inst.as_value(), u),
                    "{} does not dominate its use in `{}`",
                    inst.describe(),
                    u.user
                );
                if let Some(user) = u.user.as_instruction() {
                    if user.opcode() != Opcode::Phi {
                        assert!(dom.dominates_instruction(inst.as_value(), user));
                    }
                }
                checked += 1;
            }
        }
    }
    checked
}

#[test]
fn instruction_dominance() {
    let ctx = Context::new();
    let walk = Module::parse_ir(&ctx, "ir_walk.ll", IR_WALK).unwrap();
    let n = all_uses_dominated(&walk);
    assert!(n > 20, "{n} uses");
    let module = Module::parse_ir(&ctx, "cfg.ll", CFG).unwrap();
    assert!(all_uses_dominated(&module) > 5);

    let f = module.function("invoke_edges").unwrap();
    let cfg = Cfg::new(f);
    let dom = Dominators::new(&cfg);
    let by_name: HashMap<String, Instruction<'_>> = f
        .instructions()
        .into_iter()
        .map(|i| (i.name(), i))
        .collect();
    let (x, r, used, lp, p) = (
        by_name["x"],
        by_name["r"],
        by_name["use"],
        by_name["lp"],
        by_name["p"],
    );
    // Order within a block; an instruction does not dominate itself.
    assert!(dom.dominates_instruction(x.into(), r));
    assert!(!dom.dominates_instruction(r.into(), x));
    assert!(!dom.dominates_instruction(x.into(), x));
    // An invoke's result exists on the normal edge only.
    assert!(dom.dominates_instruction(r.into(), used));
    assert!(!dom.dominates_instruction(r.into(), lp));
    // The phi in %join uses %r on the edge from %normal (dominated) and %x on the edge
    // from %lpad (dominated); %r does not dominate the phi itself.
    let uses = r.uses();
    let phi_use: Use<'_> = *uses.iter().find(|u| u.user == p.as_value()).unwrap();
    assert!(dom.dominates_use(r.into(), phi_use));
    assert!(!dom.dominates_instruction(r.into(), p));
    assert!(
        dom.dominates_instruction(f.params()[0], x),
        "arguments dominate everything"
    );

    // A phi in the normal destination using the invoke result on that very edge.
    let f = module.function("invoke_phi").unwrap();
    let cfg = Cfg::new(f);
    let dom = Dominators::new(&cfg);
    let r = f.instructions()[0];
    let u = r.uses()[0];
    assert!(dom.dominates_use(r.into(), u));

    // Instructions inserted after the snapshot are still ordered.
    let f = module.function("invoke_edges").unwrap();
    let cfg = Cfg::new(f);
    let dom = Dominators::new(&cfg);
    let b = Builder::new(&module);
    b.position_before(used).unwrap();
    let i32_ty = b.int_type(32).unwrap();
    let one = b.const_int(i32_ty, 1).unwrap();
    let fresh = b
        .call(
            b.function_type(i32_ty, &[i32_ty], false).unwrap(),
            module.function("pick").unwrap(),
            &[one],
            &[],
            "fresh",
        )
        .unwrap();
    assert_eq!(cfg.comes_before(fresh, used), Some(true));
    assert_eq!(cfg.comes_before(used, fresh), Some(false));
    assert!(dom.dominates_instruction(fresh.into(), used));
    assert!(dom.dominates_instruction(by_name["r"].into(), fresh));
    b.erase(fresh).unwrap();
    assert_eq!(cfg.comes_before(fresh, used), None);
    assert!(!dom.dominates_instruction(fresh.into(), used));
}

#[test]
fn declarations_have_empty_cfgs() {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "cfg.ll", CFG).unwrap();
    let cfg = Cfg::new(module.function("may_throw").unwrap());
    assert!(cfg.is_empty());
    let dom = Dominators::new(&cfg);
    assert_eq!(dom.immediate_dominator(0), None);
    assert!(cfg.reverse_post_order().is_empty());
    let names: HashSet<String> = module.function_list().iter().map(|f| f.name()).collect();
    assert!(names.contains("pick"));
}
