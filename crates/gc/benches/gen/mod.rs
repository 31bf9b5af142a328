//! The benchmark's input: one big function of a garbage-collected language, written twice
//! from the same choices.
//!
//! - Locus's flavour ([`Generated::locus`]): its input form. Tracked pointers are
//!   `ptr addrspace(10)`; interior pointers come from an `addrspacecast` to
//!   `ptr addrspace(11)` and a GEP; the entry block calls `@julia.get_pgcstack()`.
//! - RS4GC's flavour ([`Generated::statepoint`]): the same function for LLVM's
//!   `rewrite-statepoints-for-gc`: every GC pointer, base or derived, is a
//!   `ptr addrspace(1)`, the function has `gc "statepoint-example"`, there is no
//!   `julia.get_pgcstack` and no cast (a derived pointer is a GEP straight off its base,
//!   whose base RS4GC finds itself). Calls are ordinary calls; RS4GC wraps them in
//!   `gc.statepoint`.
//!
//! The flavours differ only in those casts and the one `get_pgcstack` call, so both have
//! the same safepoints, the same values and the same live ranges.
//!
//! Every object has one layout: two pointer fields (offsets 0 and 8) then 48 raw bytes
//! (offsets 16 to 63), `@locus_gc_alloc(i64 2, i64 48)`. Pointers are stored only into the
//! pointer fields and integers only into the raw bytes, and every pointer field ever loaded
//! was stored non-null before, so that the Locus flavour made `runnable` really runs under
//! Locus's stress collector (a check that the generated program means something, not only
//! that it parses).
//!
//! The function is a sequence of regions, picked by a seeded generator:
//!
//! - *straight*: an allocation; the new object links to the object it evicts from a window
//!   of recent objects and points to a long-lived one; a GEP into another recent object is
//!   computed before the allocation and loaded after it (a derived pointer live across a
//!   safepoint);
//! - *call*: a load of a tracked pointer out of a recent object, passed with a long-lived
//!   object to `@callee` (a safepoint with tracked arguments that returns a new object),
//!   then a safepoint poll `@locus_gc_safepoint()`;
//! - *diamond*: a branch on the accumulator; one arm allocates, the other calls `@callee`;
//!   the join has a phi of the two tracked objects, a phi of two derived pointers into them
//!   and an integer phi, then a poll with the derived phi live across it;
//! - *loop*: a single-block loop of four iterations building a list (a phi of tracked
//!   pointers), walking the raw bytes of a recent object with a derived-pointer phi, with an
//!   allocation and a poll in the body;
//! - *select*: a select between two recent objects and one between derived pointers into
//!   them, a poll, then a load through each (the tracked select's pointer field is stored
//!   into a third recent object);
//!
//! each followed by integer filler (`add`, `xor`, `mul`, `lshr` on the accumulator) until the
//! function has `ratio` instructions per safepoint. What is live: `env` objects allocated
//! in the entry block and used to the end (live across every safepoint), `mid` objects
//! replaced every few hundred safepoints, and a FIFO `window` of the most recent objects,
//! each live across about `window` allocations. The exit block reads every object still
//! held and returns the accumulator.

use std::collections::VecDeque;
use std::fmt::Write as _;

/// The size and shape of the function.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Instructions to generate (of the Locus flavour, whose count includes its casts); the
    /// generator stops at the first region boundary past this.
    pub instructions: usize,
    /// Instructions per safepoint (integer filler makes up the difference).
    pub ratio: usize,
    /// Objects live across the whole function.
    pub env: usize,
    /// Objects live across a few hundred safepoints.
    pub mid: usize,
    /// The window of recent objects.
    pub window: usize,
    /// Seed of the region choices.
    pub seed: u64,
}

impl Params {
    /// The benchmark's shape at `instructions` instructions: one safepoint per 10
    /// instructions, 4 whole-function objects, 4 medium-lived ones, a window of 8.
    pub fn new(instructions: usize) -> Self {
        Params {
            instructions,
            ratio: 10,
            env: 4,
            mid: 4,
            window: 8,
            seed: 0x10C0_5EED,
        }
    }
}

/// What was generated, counted per flavour where they differ.
#[derive(Clone, Debug, Default)]
pub struct Generated {
    /// The Locus flavour's text.
    pub locus: String,
    /// The RS4GC flavour's text.
    pub statepoint: String,
    /// Instructions of the big function, Locus flavour.
    pub instructions_locus: usize,
    /// Instructions of the big function, RS4GC flavour (no casts, no `get_pgcstack`).
    pub instructions_statepoint: usize,
    /// Calls that may collect (the same in both).
    pub safepoints: usize,
    /// Basic blocks.
    pub blocks: usize,
    /// Regions of each kind: straight, call, diamond, loop, select.
    pub regions: [usize; 5],
    /// Phis of tracked pointers.
    pub tracked_phis: usize,
    /// Phis of derived pointers.
    pub derived_phis: usize,
    /// Selects of tracked pointers.
    pub tracked_selects: usize,
    /// Selects of derived pointers.
    pub derived_selects: usize,
    /// Loads of tracked pointers out of objects.
    pub tracked_loads: usize,
    /// Stores of tracked pointers into objects.
    pub tracked_stores: usize,
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// How one flavour spells things.
#[derive(Clone, Copy)]
struct Fl {
    locus: bool,
    /// Tracked pointer type.
    t: &'static str,
    /// Derived pointer type.
    d: &'static str,
}

impl Fl {
    const LOCUS: Fl = Fl {
        locus: true,
        t: "ptr addrspace(10)",
        d: "ptr addrspace(11)",
    };
    const STATEPOINT: Fl = Fl {
        locus: false,
        t: "ptr addrspace(1)",
        d: "ptr addrspace(1)",
    };

    /// The derived (addrspace 11) view of object `o`: its cast in Locus's flavour, the
    /// object itself in RS4GC's.
    fn dv(self, o: &str) -> String {
        if self.locus {
            format!("%{o}.d")
        } else {
            format!("%{o}")
        }
    }
}

/// Both texts, written together.
struct Out {
    a: String,
    b: String,
    insts_a: usize,
    insts_b: usize,
    safepoints: usize,
    blocks: usize,
    /// The block being written.
    block: String,
    counter: usize,
}

impl Out {
    /// One instruction in both flavours.
    fn both(&mut self, line: impl Fn(Fl) -> String) {
        for (fl, text) in [(Fl::LOCUS, &mut self.a), (Fl::STATEPOINT, &mut self.b)] {
            text.push_str("  ");
            text.push_str(&line(fl));
            text.push('\n');
        }
        self.insts_a += 1;
        self.insts_b += 1;
    }

    /// A call that may collect, in both flavours.
    fn safepoint(&mut self, line: impl Fn(Fl) -> String) {
        self.both(line);
        self.safepoints += 1;
    }

    /// `%o.d = addrspacecast %o`: Locus's flavour only.
    fn cast(&mut self, o: &str) {
        let _ = writeln!(
            self.a,
            "  %{o}.d = addrspacecast ptr addrspace(10) %{o} to ptr addrspace(11)"
        );
        self.insts_a += 1;
    }

    fn label(&mut self, name: &str) {
        for text in [&mut self.a, &mut self.b] {
            let _ = writeln!(text, "{name}:");
        }
        self.block = name.to_string();
        self.blocks += 1;
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("{prefix}{}", self.counter)
    }

    /// A new object: `alloc(2, 48)` and its cast.
    fn alloc(&mut self, o: &str) {
        self.safepoint(|f| format!("%{o} = call {} @locus_gc_alloc(i64 2, i64 48)", f.t));
        self.cast(o);
    }

    /// `%r = getelementptr inbounds i8, D dv(o), i64 off`.
    fn gep(&mut self, r: &str, o: &str, off: u32) {
        self.both(|f| {
            format!(
                "%{r} = getelementptr inbounds i8, {d} {}, i64 {off}",
                f.dv(o),
                d = f.d
            )
        });
    }
}

/// The generator's state: what is held, and the accumulator.
struct Gen {
    out: Out,
    rng: Rng,
    env: Vec<String>,
    mid: Vec<String>,
    window: VecDeque<String>,
    /// The current i64 accumulator, as an operand (`%x` or a constant).
    acc: String,
    g: Generated,
}

impl Gen {
    fn pick_env(&mut self) -> String {
        let i = self.rng.below(self.env.len());
        self.env[i].clone()
    }

    fn pick_window(&mut self) -> String {
        let i = self.rng.below(self.window.len());
        self.window[i].clone()
    }

    /// A raw field offset: 16, 24, ..., 56.
    fn raw_offset(&mut self) -> u32 {
        16 + 8 * self.rng.below(6) as u32
    }

    /// Stores tracked `v` into pointer field `field` (0 or 1) of object `o`.
    fn store_ptr(&mut self, v: &str, o: &str, field: u32) {
        if field == 0 {
            self.out
                .both(|f| format!("store {} %{v}, {} {}", f.t, f.d, f.dv(o)));
        } else {
            let p = self.out.fresh("pf");
            self.out.gep(&p, o, 8 * field);
            self.out
                .both(|f| format!("store {} %{v}, {} %{p}", f.t, f.d));
        }
        self.g.tracked_stores += 1;
    }

    /// Reads an integer from a raw field of `o` into the accumulator.
    fn read_int(&mut self, o: &str) {
        let off = self.raw_offset();
        let p = self.out.fresh("rp");
        self.out.gep(&p, o, off);
        let v = self.out.fresh("rv");
        self.out.both(|f| format!("%{v} = load i64, {} %{p}", f.d));
        self.mix("add", &v);
    }

    /// Writes the accumulator into a raw field of `o`.
    fn write_int(&mut self, o: &str) {
        let off = self.raw_offset();
        let p = self.out.fresh("wp");
        self.out.gep(&p, o, off);
        let acc = self.acc.clone();
        self.out.both(|f| format!("store i64 {acc}, {} %{p}", f.d));
    }

    /// `acc = op acc, %v`.
    fn mix(&mut self, op: &str, v: &str) {
        let r = self.out.fresh("acc");
        let acc = self.acc.clone();
        self.out.both(|_| format!("%{r} = {op} i64 {acc}, %{v}"));
        self.acc = format!("%{r}");
    }

    /// Puts `o` into the window; the object it evicts is stored into `o`'s field 0 (its
    /// last use), and now and then `o` also replaces a medium-lived object.
    fn push_window(&mut self, o: &str) {
        if let Some(old) = self.window.pop_front() {
            self.store_ptr(&old, o, 0);
        }
        self.window.push_back(o.to_string());
        if !self.mid.is_empty() && self.rng.below(150) == 0 {
            let i = self.rng.below(self.mid.len());
            let old = std::mem::replace(&mut self.mid[i], o.to_string());
            self.read_int(&old);
        }
    }

    fn straight(&mut self) {
        let w = self.pick_window();
        let off = self.raw_offset();
        let early = self.out.fresh("dp");
        self.out.gep(&early, &w, off);
        let o = self.out.fresh("o");
        self.out.alloc(&o);
        let e = self.pick_env();
        self.store_ptr(&e, &o, 1);
        self.write_int(&o);
        let v = self.out.fresh("dv");
        self.out
            .both(|f| format!("%{v} = load i64, {} %{early}", f.d));
        self.mix("add", &v);
        self.push_window(&o);
        self.g.regions[0] += 1;
    }

    fn call(&mut self) {
        let w = self.pick_window();
        let y = self.out.fresh("ld");
        self.out
            .both(|f| format!("%{y} = load {}, {} {}", f.t, f.d, f.dv(&w)));
        self.g.tracked_loads += 1;
        let e = self.pick_env();
        let c = self.out.fresh("c");
        self.out
            .safepoint(|f| format!("%{c} = call {t} @callee({t} %{y}, {t} %{e})", t = f.t));
        self.out.cast(&c);
        self.out
            .safepoint(|_| "call void @locus_gc_safepoint()".into());
        self.read_int(&c);
        self.push_window(&c);
        self.g.regions[1] += 1;
    }

    fn diamond(&mut self) {
        let k = self.out.fresh("");
        let (l, r, m) = (format!("d{k}.l"), format!("d{k}.r"), format!("d{k}.m"));
        let bit = self.out.fresh("bit");
        let cond = self.out.fresh("cond");
        let acc = self.acc.clone();
        self.out.both(|_| format!("%{bit} = and i64 {acc}, 1"));
        self.out
            .both(|_| format!("%{cond} = icmp eq i64 %{bit}, 0"));
        self.out
            .both(|_| format!("br i1 %{cond}, label %{l}, label %{r}"));

        // Left: allocate.
        self.out.label(&l);
        let a = self.out.fresh("a");
        let w = self.pick_window();
        self.out.alloc(&a);
        self.store_ptr(&w, &a, 0);
        let off_a = self.raw_offset();
        let fa = self.out.fresh("fa");
        self.out.gep(&fa, &a, off_a);
        let tl = self.out.fresh("tl");
        self.out.both(|_| format!("%{tl} = add i64 {acc}, 1"));
        self.out.both(|_| format!("br label %{m}"));

        // Right: call.
        self.out.label(&r);
        let b = self.out.fresh("b");
        let w2 = self.pick_window();
        let e = self.pick_env();
        self.out
            .safepoint(|f| format!("%{b} = call {t} @callee({t} %{w2}, {t} %{e})", t = f.t));
        self.out.cast(&b);
        let off_b = self.raw_offset();
        let fb = self.out.fresh("fb");
        self.out.gep(&fb, &b, off_b);
        let tr = self.out.fresh("tr");
        self.out
            .both(|f| format!("%{tr} = load i64, {} %{fb}", f.d));
        self.out.both(|_| format!("br label %{m}"));

        // Join.
        self.out.label(&m);
        let j = self.out.fresh("j");
        let jp = self.out.fresh("jp");
        let jacc = self.out.fresh("jacc");
        self.out
            .both(|f| format!("%{j} = phi {} [ %{a}, %{l} ], [ %{b}, %{r} ]", f.t));
        self.out
            .both(|f| format!("%{jp} = phi {} [ %{fa}, %{l} ], [ %{fb}, %{r} ]", f.d));
        self.out
            .both(|_| format!("%{jacc} = phi i64 [ %{tl}, %{l} ], [ %{tr}, %{r} ]"));
        self.g.tracked_phis += 1;
        self.g.derived_phis += 1;
        self.acc = format!("%{jacc}");
        self.out.cast(&j);
        self.out
            .safepoint(|_| "call void @locus_gc_safepoint()".into());
        let v = self.out.fresh("jv");
        self.out.both(|f| format!("%{v} = load i64, {} %{jp}", f.d));
        self.mix("xor", &v);
        self.push_window(&j);
        self.g.regions[2] += 1;
    }

    fn looped(&mut self) {
        let k = self.out.fresh("");
        let (body, exit) = (format!("l{k}.body"), format!("l{k}.exit"));
        let pre = self.out.block.clone();
        let w = self.pick_window();
        let w2 = self.pick_window();
        let start = self.out.fresh("ls");
        self.out.gep(&start, &w2, 16);
        self.out.both(|_| format!("br label %{body}"));

        self.out.label(&body);
        let (i, h, p, s) = (
            self.out.fresh("i"),
            self.out.fresh("h"),
            self.out.fresh("p"),
            self.out.fresh("s"),
        );
        let (n, v, s2, p2, i2, more) = (
            self.out.fresh("n"),
            self.out.fresh("lv"),
            self.out.fresh("s"),
            self.out.fresh("p"),
            self.out.fresh("i"),
            self.out.fresh("more"),
        );
        let acc = self.acc.clone();
        self.out
            .both(|_| format!("%{i} = phi i64 [ 0, %{pre} ], [ %{i2}, %{body} ]"));
        self.out
            .both(|f| format!("%{h} = phi {} [ %{w}, %{pre} ], [ %{n}, %{body} ]", f.t));
        self.out.both(|f| {
            format!(
                "%{p} = phi {} [ %{start}, %{pre} ], [ %{p2}, %{body} ]",
                f.d
            )
        });
        self.out
            .both(|_| format!("%{s} = phi i64 [ {acc}, %{pre} ], [ %{s2}, %{body} ]"));
        self.g.tracked_phis += 1;
        self.g.derived_phis += 1;
        self.out.alloc(&n);
        self.out
            .both(|f| format!("store {} %{h}, {} {}", f.t, f.d, f.dv(&n)));
        self.g.tracked_stores += 1;
        self.out
            .safepoint(|_| "call void @locus_gc_safepoint()".into());
        self.out.both(|f| format!("%{v} = load i64, {} %{p}", f.d));
        self.out.both(|_| format!("%{s2} = add i64 %{s}, %{v}"));
        self.out
            .both(|f| format!("%{p2} = getelementptr inbounds i8, {} %{p}, i64 8", f.d));
        self.out.both(|_| format!("%{i2} = add i64 %{i}, 1"));
        self.out
            .both(|_| format!("%{more} = icmp ult i64 %{i2}, 4"));
        self.out
            .both(|_| format!("br i1 %{more}, label %{body}, label %{exit}"));

        self.out.label(&exit);
        self.acc = format!("%{s2}");
        self.push_window(&n);
        self.g.regions[3] += 1;
    }

    fn select(&mut self) {
        let (w1, w2, w3) = (self.pick_window(), self.pick_window(), self.pick_window());
        let (bit, cond, sel, g1, g2, dsel, v, y) = (
            self.out.fresh("sbit"),
            self.out.fresh("scond"),
            self.out.fresh("sel"),
            self.out.fresh("sg"),
            self.out.fresh("sg"),
            self.out.fresh("dsel"),
            self.out.fresh("sv"),
            self.out.fresh("sy"),
        );
        let acc = self.acc.clone();
        self.out.both(|_| format!("%{bit} = and i64 {acc}, 2"));
        self.out
            .both(|_| format!("%{cond} = icmp eq i64 %{bit}, 0"));
        self.out
            .both(|f| format!("%{sel} = select i1 %{cond}, {t} %{w1}, {t} %{w2}", t = f.t));
        let (o1, o2) = (self.raw_offset(), self.raw_offset());
        self.out.gep(&g1, &w1, o1);
        self.out.gep(&g2, &w2, o2);
        self.out
            .both(|f| format!("%{dsel} = select i1 %{cond}, {d} %{g1}, {d} %{g2}", d = f.d));
        self.g.tracked_selects += 1;
        self.g.derived_selects += 1;
        self.out
            .safepoint(|_| "call void @locus_gc_safepoint()".into());
        self.out
            .both(|f| format!("%{v} = load i64, {} %{dsel}", f.d));
        self.mix("add", &v);
        self.out.cast(&sel);
        self.out
            .both(|f| format!("%{y} = load {}, {} {}", f.t, f.d, f.dv(&sel)));
        self.g.tracked_loads += 1;
        self.store_ptr(&y, &w3, 1);
        self.g.regions[4] += 1;
    }

    /// Integer work until the function is back at `ratio` instructions per safepoint.
    fn filler(&mut self, ratio: usize) {
        const OPS: [(&str, &str); 4] =
            [("add", "7"), ("xor", "40503"), ("mul", "31"), ("lshr", "3")];
        while self.out.insts_a < ratio * self.out.safepoints {
            let (op, c) = OPS[self.rng.below(OPS.len())];
            let r = self.out.fresh("f");
            let acc = self.acc.clone();
            self.out.both(|_| format!("%{r} = {op} i64 {acc}, {c}"));
            self.acc = format!("%{r}");
        }
    }
}

const OBJECT_CALLEE: &str = r#"
define ptr addrspace(10) @callee(ptr addrspace(10) %x, ptr addrspace(10) %y) {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %o = call ptr addrspace(10) @locus_gc_alloc(i64 2, i64 48)
  %o.d = addrspacecast ptr addrspace(10) %o to ptr addrspace(11)
  store ptr addrspace(10) %x, ptr addrspace(11) %o.d
  %o.1 = getelementptr inbounds i8, ptr addrspace(11) %o.d, i64 8
  store ptr addrspace(10) %y, ptr addrspace(11) %o.1
  %x.d = addrspacecast ptr addrspace(10) %x to ptr addrspace(11)
  %x.v = getelementptr inbounds i8, ptr addrspace(11) %x.d, i64 16
  %v = load i64, ptr addrspace(11) %x.v
  %v1 = add i64 %v, 1
  %o.v = getelementptr inbounds i8, ptr addrspace(11) %o.d, i64 16
  store i64 %v1, ptr addrspace(11) %o.v
  ret ptr addrspace(10) %o
}

define i64 @main() {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %r = call i64 @big(i64 12345)
  ret i64 %r
}
"#;

/// Generates the function `@big(i64 %seed)` in both flavours. With `runnable`, the Locus
/// text also defines `@callee` and an `i64 @main()` that calls `@big`, so that it can be
/// run; otherwise `@callee` is only declared, as in the RS4GC text.
pub fn generate(p: Params, runnable: bool) -> Generated {
    let mut out = Out {
        a: String::new(),
        b: String::new(),
        insts_a: 0,
        insts_b: 0,
        safepoints: 0,
        blocks: 0,
        block: String::new(),
        counter: 0,
    };
    out.a.push_str(
        "; Generated by crates/gc/benches/gen: Locus flavour.\n\
         declare ptr @julia.get_pgcstack()\n\
         declare noalias nonnull ptr addrspace(10) @locus_gc_alloc(i64, i64)\n\
         declare void @locus_gc_safepoint()\n",
    );
    if runnable {
        out.a.push_str(OBJECT_CALLEE);
    } else {
        out.a
            .push_str("declare ptr addrspace(10) @callee(ptr addrspace(10), ptr addrspace(10))\n");
    }
    out.a.push_str("\ndefine i64 @big(i64 %seed) {\n");
    out.b.push_str(
        "; Generated by crates/gc/benches/gen: RS4GC flavour.\n\
         declare noalias nonnull ptr addrspace(1) @locus_gc_alloc(i64, i64)\n\
         declare void @locus_gc_safepoint()\n\
         declare ptr addrspace(1) @callee(ptr addrspace(1), ptr addrspace(1))\n\
         \n\
         define i64 @big(i64 %seed) gc \"statepoint-example\" {\n",
    );
    out.label("entry");
    out.a
        .push_str("  %pgcstack = call ptr @julia.get_pgcstack()\n");
    out.insts_a += 1;

    let mut g = Gen {
        out,
        rng: Rng(p.seed),
        env: Vec::new(),
        mid: Vec::new(),
        window: VecDeque::new(),
        acc: "%seed".into(),
        g: Generated::default(),
    };
    // The long-lived objects, then the window, each linked to the one before.
    let mut prev: Option<String> = None;
    for i in 0..p.env + p.mid + p.window.max(1) {
        let o = format!("init{i}");
        g.out.alloc(&o);
        if let Some(prev) = &prev {
            g.store_ptr(prev, &o, 0);
            g.store_ptr(prev, &o, 1);
        }
        g.write_int(&o);
        prev = Some(o.clone());
        if i < p.env {
            g.env.push(o);
        } else if i < p.env + p.mid {
            g.mid.push(o);
        } else {
            g.window.push_back(o);
        }
    }
    if g.env.is_empty() {
        g.env.push(g.window[0].clone());
    }
    g.filler(p.ratio);

    while g.out.insts_a < p.instructions {
        match g.rng.below(20) {
            0..=7 => g.straight(),
            8..=11 => g.call(),
            12..=14 => g.diamond(),
            15..=17 => g.looped(),
            _ => g.select(),
        }
        g.filler(p.ratio);
    }

    // The exit: read every object still held.
    let held: Vec<String> = g
        .env
        .iter()
        .chain(&g.mid)
        .chain(&g.window)
        .cloned()
        .collect();
    for o in held {
        g.read_int(&o);
    }
    let acc = g.acc.clone();
    g.out.both(|_| format!("ret i64 {acc}"));
    g.out.a.push_str("}\n");
    g.out.b.push_str("}\n");

    let mut r = g.g;
    r.instructions_locus = g.out.insts_a;
    r.instructions_statepoint = g.out.insts_b;
    r.safepoints = g.out.safepoints;
    r.blocks = g.out.blocks;
    r.locus = g.out.a;
    r.statepoint = g.out.b;
    r
}
