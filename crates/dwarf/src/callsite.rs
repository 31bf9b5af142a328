//! Entry values from call sites (feature `binary`), as gdb finds them
//! (`gdb/dwarf2/loc.c`: `dwarf_expr_reg_to_entry_parameter`,
//! `call_site_find_chain`, `func_verify_no_selftailcall`).
//!
//! A parameter's value on entry (`DW_OP_entry_value(DW_OP_regN)`,
//! `DW_OP_GNU_parameter_ref`) is the `DW_AT_call_value` of the caller's
//! `DW_TAG_call_site_parameter` (`DW_TAG_GNU_call_site_parameter`) at the call
//! that returns to the caller frame's PC, evaluated in the caller's frame (its
//! registers, its frame base, its own entry values). It is taken only when that
//! call provably enters this frame's function, for the frame may have been
//! reached by a tail call (`jmp`) from the function the call site names, whose
//! arguments are not this function's:
//!
//! * the call site's target (`DW_AT_call_origin`, or the GNU spelling
//!   `DW_AT_abstract_origin`; `DW_AT_call_target`/`DW_AT_GNU_call_site_target`
//!   evaluated in the caller's frame) is this function's entry; or
//! * it is another function from which tail calls (`DW_AT_call_tail_call`,
//!   `DW_AT_GNU_tail_call`) reach this one along one chain that every path
//!   agrees on next to this function; the values are then those of the last
//!   tail call, evaluated as the tail-calling function left its registers;
//! * and this function cannot tail-call itself, through any chain of tail
//!   calls (its entry values would then be those of a later entry).
//!
//! Otherwise no entry value is known, and [`EntryValues::refused`] says why.
//! clang's tail calls have no return address (`DW_AT_call_pc` only): gdb 13
//! drops them, so it finds no chain through them and no self tail call either;
//! here they count, for both (a chain clang's tail calls prove gives values gdb
//! does not print; a self tail call through them refuses values gdb prints).
//! `DW_OP_entry_value` of a register's pointee (`DW_OP_bregN 0;
//! DW_OP_deref_size S`) is the call site's `DW_AT_call_data_value`; gdb takes
//! no other entry-value expression, nor does a [`crate::binary::State`] with
//! [`EntryValues`].

use alloc::borrow::ToOwned;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use gimli::AttributeValue;

use crate::binary::{self, encoding_of, BaseType, Decoded, Frame, State, WithFrame, R};
use crate::{Encoding, Entry, Error, Op, Storage, Target};

/// What a call-site parameter is matched by: the register it is passed in
/// (`DW_AT_location` `DW_OP_regN`) or the callee's formal parameter it binds
/// (`DW_AT_call_parameter`, GNU `DW_AT_abstract_origin`; `.debug_info` offset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Register(u16),
    Parameter(u64),
}

/// One parameter of a call site: its caller-side value expressions.
#[derive(Clone, Debug)]
struct Parameter {
    key: Key,
    /// `DW_AT_call_value`.
    value: Option<Vec<u8>>,
    /// `DW_AT_call_data_value`: the value the parameter points to.
    data_value: Option<Vec<u8>>,
}

/// Where a call goes.
#[derive(Clone, Debug)]
enum Callee {
    /// A function's entry (file address).
    Entry(u64),
    /// `DW_AT_call_target`: an expression of the caller's frame.
    Expression(Vec<u8>),
    /// Not known, and why.
    Unknown(String),
}

/// A `DW_TAG_call_site`.
#[derive(Clone, Debug)]
struct Site {
    /// `DW_AT_call_return_pc` (GNU `DW_AT_low_pc`), else `DW_AT_call_pc`.
    pc: u64,
    /// The entry of the function the call is in.
    caller: u64,
    callee: Callee,
    parameters: Vec<Parameter>,
    unit: usize,
    /// gcc's call of a function it knows (`DW_AT_call_origin`, resolved to one concrete
    /// function), neither a tail call nor `DW_AT_noreturn`: the call returns to `pc`,
    /// and gcc's IPA-RA may keep values in the registers that function leaves alone.
    returns_from_known: bool,
}

/// A concrete function.
#[derive(Clone, Debug)]
struct Function {
    name: String,
    frame_base: Option<Vec<u8>>,
    /// Its tail-call sites (indices into `CallSites::sites`).
    tail_calls: Vec<usize>,
}

/// A unit's encoding and base types.
#[derive(Clone, Debug)]
struct UnitInfo {
    encoding: Encoding,
    base_types: Vec<BaseType>,
    /// gcc made it (`DW_AT_producer` "GNU ...").
    by_gcc: bool,
}

/// What is known of a frame's function on entry, from its caller's call site:
/// the values passed in registers and to parameters, or why none is known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntryValues {
    /// `DW_AT_call_value` of each register parameter, evaluated in the caller.
    pub registers: BTreeMap<u16, Vec<u8>>,
    /// `DW_AT_call_data_value` (what the register pointed to at the call).
    pub data: BTreeMap<u16, Vec<u8>>,
    /// `DW_AT_call_value` of parameters bound by DIE (`DW_OP_GNU_parameter_ref`),
    /// by the formal parameter's `.debug_info` offset.
    pub parameters: BTreeMap<u64, Vec<u8>>,
    /// Why a value the call site has could not be computed in the caller.
    pub unknown: BTreeMap<String, String>,
    /// Why no entry value of this frame is known (no caller, a call site
    /// that does not provably call this function, a self tail call...).
    pub refused: Option<String>,
    /// The call site the values come from (for messages): `CALLER at PC`.
    pub site: String,
}

impl EntryValues {
    /// No entry values, because of `why`.
    pub fn refused(why: impl Into<String>) -> EntryValues {
        EntryValues {
            refused: Some(why.into()),
            ..EntryValues::default()
        }
    }

    fn missing(&self, what: &str) -> String {
        if let Some(why) = &self.refused {
            return format!("entry value of {what}: {why}");
        }
        if let Some(why) = self.unknown.get(what) {
            return format!("entry value of {what}: {why}");
        }
        format!(
            "entry value of {what}: the call site {} passes no value for it",
            self.site
        )
    }

    /// Register `r`'s value on entry.
    pub fn register(&self, r: u16) -> Result<&[u8], String> {
        self.registers
            .get(&r)
            .map(Vec::as_slice)
            .ok_or_else(|| self.missing(&register_name(r)))
    }

    /// What register `r` pointed to on entry (`DW_AT_call_data_value`).
    pub fn pointee(&self, r: u16) -> Result<&[u8], String> {
        self.data
            .get(&r)
            .map(Vec::as_slice)
            .ok_or_else(|| self.missing(&format!("*{}", register_name(r))))
    }

    /// The value of the formal parameter at `.debug_info` offset `die` on entry.
    pub fn parameter(&self, die: u64) -> Result<&[u8], String> {
        self.parameters
            .get(&die)
            .map(Vec::as_slice)
            .ok_or_else(|| self.missing(&format!("parameter DIE {die:#x}")))
    }
}

fn register_name(r: u16) -> String {
    format!("DW_OP_reg{r}")
}

/// The key of [`EntryValues::unknown`] for a parameter.
fn key_name(key: Key) -> String {
    match key {
        Key::Register(r) => register_name(r),
        Key::Parameter(die) => format!("parameter DIE {die:#x}"),
    }
}

/// Most functions a tail-call search visits.
const MAX_VISITS: usize = 4096;

/// The call sites and functions of a binary's DWARF, read once
/// ([`crate::binary::Binary::call_sites`]); addresses are file addresses,
/// moved by `load_bias` where they meet the running program.
#[derive(Clone, Debug, Default)]
pub struct CallSites {
    sites: Vec<Site>,
    /// Sites by return address (and, for clang's tail calls, the call's address).
    by_pc: BTreeMap<u64, usize>,
    /// Concrete functions by entry.
    functions: BTreeMap<u64, Function>,
    /// Every range of every concrete function: (begin, end, entry).
    ranges: Vec<(u64, u64, u64)>,
    units: Vec<UnitInfo>,
    load_bias: u64,
}

/// A subprogram DIE while the units are read.
struct SubprogramDie {
    entry: Option<u64>,
    ranges: Vec<(u64, u64)>,
    origin: Option<u64>,
    names: Vec<String>,
    frame_base: Option<Vec<u8>>,
    /// `DW_AT_noreturn`.
    noreturn: bool,
}

/// A call site DIE while the units are read: its target DIE not yet resolved.
struct SiteDie {
    site: Site,
    origin: Option<u64>,
    tail: bool,
}

impl CallSites {
    /// Reads every call site and concrete function of `dwarf` (split units are
    /// skipped: their call sites are in the `.dwo`).
    pub(crate) fn read(dwarf: &gimli::Dwarf<R<'_>>, load_bias: u64) -> Result<CallSites, Error> {
        let mut subprograms: BTreeMap<u64, SubprogramDie> = BTreeMap::new();
        let mut site_dies: Vec<SiteDie> = Vec::new();
        let mut units = Vec::new();
        let mut headers = dwarf.units();
        while let Some(header) = headers.next()? {
            let unit = dwarf.unit(header)?;
            if unit.dwo_id.is_some() {
                continue;
            }
            let index = units.len();
            units.push(UnitInfo {
                encoding: encoding_of(&unit),
                base_types: binary::base_types(&unit)?,
                by_gcc: produced_by_gcc(dwarf, &unit)?,
            });
            read_unit(dwarf, &unit, index, &mut subprograms, &mut site_dies)?;
        }
        let mut out = CallSites {
            units,
            load_bias,
            ..CallSites::default()
        };
        let mut by_name: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        let mut instances: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for sp in subprograms.values() {
            let Some(entry) = sp.entry else { continue };
            let names = names_of(sp, &subprograms);
            for name in names {
                by_name.entry(name.as_str()).or_default().push(entry);
            }
            if let Some(o) = sp.origin {
                instances.entry(o).or_default().push(entry);
            }
            for (b, e) in &sp.ranges {
                out.ranges.push((*b, *e, entry));
            }
            out.functions.entry(entry).or_insert_with(|| Function {
                name: names.first().cloned().unwrap_or_else(|| "?".to_owned()),
                frame_base: sp.frame_base.clone(),
                tail_calls: Vec::new(),
            });
        }
        for list in by_name.values_mut() {
            list.sort_unstable();
            list.dedup();
        }
        out.ranges.sort_unstable();
        for d in site_dies {
            let mut site = d.site;
            if site.caller == CALLER_BY_PC {
                let Some(caller) = out
                    .function_at(site.pc)
                    .or_else(|| out.function_at(site.pc.wrapping_sub(1)))
                else {
                    continue;
                };
                site.caller = caller;
            }
            if let (Some(origin), Callee::Unknown(_)) = (d.origin, &site.callee) {
                site.callee = resolve_origin(origin, &subprograms, &instances, &by_name);
            }
            // No return declared on the call's origin or the declaration it completes.
            let noreturn = |o: u64| {
                let sp = subprograms.get(&o);
                sp.is_some_and(|s| s.noreturn)
                    || sp
                        .and_then(|s| s.origin)
                        .and_then(|o| subprograms.get(&o))
                        .is_some_and(|s| s.noreturn)
            };
            site.returns_from_known = !d.tail
                && out.units.get(site.unit).is_some_and(|u| u.by_gcc)
                && matches!(site.callee, Callee::Entry(_))
                && d.origin.is_some_and(|o| !noreturn(o));
            let i = out.sites.len();
            out.by_pc.entry(site.pc).or_insert(i);
            if d.tail {
                if let Some(f) = out.functions.get_mut(&site.caller) {
                    f.tail_calls.push(i);
                }
            }
            out.sites.push(site);
        }
        Ok(out)
    }

    /// Whether `return_address` (in the running program) is where a call gcc made to a
    /// function it knows returns ([`crate::binary::Binary::kept_across_call`] reads
    /// call-clobbered registers only there): a `DW_TAG_call_site` of a unit gcc produced,
    /// not a tail call, whose `DW_AT_call_origin` is one concrete function that is not
    /// `DW_AT_noreturn`. After a call that does not return, the code at the return
    /// address is another path's, whose location (clang gives it the same one) says
    /// nothing of the registers during the call.
    pub fn returns_to(&self, return_address: u64) -> bool {
        self.by_pc
            .get(&return_address.wrapping_sub(self.load_bias))
            .and_then(|&i| self.sites.get(i))
            .is_some_and(|s| s.returns_from_known)
    }

    /// The entry (file address) of the concrete function whose code holds
    /// file address `at`.
    fn function_at(&self, at: u64) -> Option<u64> {
        let i = self.ranges.partition_point(|(b, _, _)| *b <= at);
        self.ranges[..i]
            .iter()
            .rev()
            .find(|(b, e, _)| *b <= at && at < *e)
            .map(|(_, _, entry)| *entry)
    }

    fn name(&self, entry: u64) -> String {
        let at = entry.wrapping_add(self.load_bias);
        match self.functions.get(&entry) {
            Some(f) => format!("{} at {at:#x}", f.name),
            None => format!("{at:#x}"),
        }
    }

    /// A call's target without a frame (tail calls): known entries only.
    fn static_target(&self, site: &Site) -> Result<u64, String> {
        match &site.callee {
            Callee::Entry(e) => Ok(*e),
            Callee::Expression(_) => Err(format!(
                "the tail call at {:#x} in {} goes through a register or memory (DW_AT_call_target), not known without its frame",
                site.pc.wrapping_add(self.load_bias),
                self.name(site.caller)
            )),
            Callee::Unknown(why) => Err(why.clone()),
        }
    }

    /// gdb's `func_verify_no_selftailcall`: whether `entry`'s function can
    /// reach itself through tail calls (or that cannot be known).
    fn no_self_tail_call(&self, entry: u64) -> Result<(), String> {
        let mut todo = alloc::vec![entry];
        let mut seen = BTreeSet::new();
        while let Some(f) = todo.pop() {
            if seen.len() > MAX_VISITS {
                return Err("too many tail calls to follow".to_owned());
            }
            let Some(function) = self.functions.get(&f) else {
                return Err(format!(
                    "no function at {:#x} in the DWARF",
                    f.wrapping_add(self.load_bias)
                ));
            };
            for &s in &function.tail_calls {
                let target = self.static_target(&self.sites[s])?;
                if target == entry {
                    return Err(format!(
                        "{} can call itself through tail calls, so its entry values may be a later entry's",
                        self.name(entry)
                    ));
                }
                if seen.insert(target) {
                    todo.push(target);
                }
            }
        }
        Ok(())
    }

    /// gdb's `call_site_find_chain`: the tail-call sites between the call
    /// `first` (whose target is known) and `callee`'s entry, as far as every
    /// path agrees: (sites, callers, callees), where the first `callers` and
    /// last `callees` sites are certain. `None` when no path or no agreement.
    fn chain(&self, first: &Site, first_target: u64, callee: u64) -> Result<Vec<usize>, String> {
        let mut result: Option<(Vec<usize>, usize, usize)> = None;
        let mut chain: Vec<usize> = Vec::new();
        let mut in_chain: BTreeSet<u64> = BTreeSet::new();
        let mut visits = 0usize;
        let mut target = first_target;
        loop {
            visits += 1;
            if visits > MAX_VISITS {
                return Err("too many tail calls to follow".to_owned());
            }
            let mut next: Option<usize> = None;
            if target == callee {
                candidate(&mut result, &chain);
                if result.is_none() {
                    break;
                }
            } else {
                let f = self.functions.get(&target).ok_or_else(|| {
                    format!(
                        "no function at {:#x} in the DWARF",
                        target.wrapping_add(self.load_bias)
                    )
                })?;
                next = f.tail_calls.first().copied();
            }
            loop {
                if let Some(n) = next {
                    if in_chain.insert(self.sites[n].pc) {
                        chain.push(n);
                        break;
                    }
                }
                next = None;
                while let Some(done) = chain.pop() {
                    in_chain.remove(&self.sites[done].pc);
                    next = self.sibling(done);
                    if next.is_some() {
                        break;
                    }
                }
                if next.is_none() {
                    break;
                }
            }
            match chain.last() {
                None => break,
                Some(&s) => target = self.static_target(&self.sites[s])?,
            }
        }
        let why = || {
            format!(
                "the call at {:#x} goes to {}, and no one chain of tail calls from there reaches {}",
                first.pc.wrapping_add(self.load_bias),
                self.name(first_target),
                self.name(callee)
            )
        };
        let (sites, callers, callees) = result.ok_or_else(why)?;
        if sites.is_empty() {
            return Ok(sites);
        }
        if callees == 0 {
            return Err(why());
        }
        // The frames gdb pretends: the certain callers, then the certain callees.
        let mut pretended: Vec<usize> = sites[..callers.min(sites.len())].to_vec();
        if callers < sites.len() {
            pretended.extend_from_slice(&sites[sites.len() - callees.min(sites.len())..]);
        }
        Ok(pretended)
    }

    /// The tail-call site after `site` in its function.
    fn sibling(&self, site: usize) -> Option<usize> {
        let f = self.functions.get(&self.sites[site].caller)?;
        let at = f.tail_calls.iter().position(|&s| s == site)?;
        f.tail_calls.get(at + 1).copied()
    }

    /// The entry values of the function of a frame at `pc` (an address in the
    /// running program, the frame's lookup PC), whose caller frame returns to
    /// `return_pc` and is `caller` (its registers, memory, CFA and own entry
    /// values; its frame base and base types are added here).
    pub fn entry_values(&self, pc: u64, return_pc: u64, caller: State<'_>) -> EntryValues {
        match self.entry_values_or_why(pc, return_pc, caller) {
            Ok(v) => v,
            Err(why) => EntryValues::refused(why),
        }
    }

    fn entry_values_or_why(
        &self,
        pc: u64,
        return_pc: u64,
        caller: State<'_>,
    ) -> Result<EntryValues, String> {
        let bias = self.load_bias;
        let at = pc.wrapping_sub(bias);
        let func = self
            .function_at(at)
            .ok_or_else(|| format!("no function holds pc {pc:#x} in the DWARF"))?;
        let &s = self
            .by_pc
            .get(&return_pc.wrapping_sub(bias))
            .ok_or_else(|| {
                format!("no DW_TAG_call_site returns to {return_pc:#x} in the caller")
            })?;
        let site = &self.sites[s];
        let mut caller = caller;
        let target = match &site.callee {
            Callee::Entry(e) => *e,
            Callee::Expression(expr) => {
                let value = self
                    .evaluate_at(site, expr, Wanted::Callee, &mut caller)
                    .map_err(|e| format!("the call's target (DW_AT_call_target): {e}"))?;
                let mut raw = [0u8; 8];
                let n = value.len().min(8);
                raw[..n].copy_from_slice(&value[..n]);
                u64::from_le_bytes(raw).wrapping_sub(bias)
            }
            Callee::Unknown(why) => return Err(why.clone()),
        };
        let chain = if target == func {
            Vec::new()
        } else {
            self.chain(site, target, func)?
        };
        self.no_self_tail_call(func)?;
        let mut entry = self.values(site, &mut caller);
        if chain.is_empty() {
            return Ok(entry);
        }
        // Through tail calls: each tail-calling function left the caller's
        // callee-saved registers as they were; its stack pointer and frame
        // base are not known.
        let mut registers = caller.registers.clone();
        registers.remove(&7);
        registers.remove(&16);
        let mut previous_target = target;
        for &t in &chain {
            let tail = &self.sites[t];
            if previous_target != tail.caller {
                entry = EntryValues::refused(format!(
                    "{} is reached through tail calls gdb cannot tell apart",
                    self.name(tail.caller)
                ));
            } else if let Err(why) = self.no_self_tail_call(tail.caller) {
                entry = EntryValues::refused(why);
            }
            let mut state = State::new(&registers, caller.memory);
            state.address_size = caller.address_size;
            state.entry = Some(&entry);
            let next = self.values(tail, &mut state);
            previous_target = self.static_target(tail)?;
            entry = next;
        }
        if previous_target != func {
            return Err(format!(
                "the tail call reaching {} is not certain",
                self.name(func)
            ));
        }
        Ok(entry)
    }

    /// Evaluates `expr`, an expression of `site`'s caller, in `frame` (the
    /// caller's frame) with its function's frame base and its unit's base types.
    fn evaluate_at<T: Target>(
        &self,
        site: &Site,
        expr: &[u8],
        kind: Wanted,
        frame: &mut T,
    ) -> Result<Vec<u8>, String> {
        let unit = &self.units[site.unit];
        let frame_base = self
            .functions
            .get(&site.caller)
            .and_then(|f| f.frame_base.as_deref())
            .map(|fb| moved(fb, unit.encoding, self.load_bias));
        let decoded = frame_base
            .as_deref()
            .and_then(|fb| Decoded::new(fb, unit.encoding).ok());
        let mut with_frame = WithFrame::new(
            &mut *frame,
            Frame {
                frame_base: decoded.as_ref().map(|d| (d, unit.encoding)),
                base_types: &unit.base_types,
                variables: &[],
            },
        );
        evaluate(expr, kind, unit.encoding, self.load_bias, &mut with_frame)
    }

    /// Every parameter value of `site`, evaluated in `frame` (its caller's).
    fn values<T: Target>(&self, site: &Site, frame: &mut T) -> EntryValues {
        let mut out = EntryValues {
            site: format!(
                "at {:#x} in {}",
                site.pc.wrapping_add(self.load_bias),
                self.name(site.caller)
            ),
            ..EntryValues::default()
        };
        for p in &site.parameters {
            let name = key_name(p.key);
            for (expr, data) in [(&p.value, false), (&p.data_value, true)] {
                let Some(expr) = expr else { continue };
                let result = self.evaluate_at(site, expr, Wanted::Value, frame);
                match (result, p.key, data) {
                    (Ok(bytes), Key::Register(r), false) => {
                        out.registers.insert(r, bytes);
                    }
                    (Ok(bytes), Key::Register(r), true) => {
                        out.data.insert(r, bytes);
                    }
                    (Ok(bytes), Key::Parameter(d), false) => {
                        out.parameters.insert(d, bytes);
                    }
                    (Ok(_), Key::Parameter(_), true) => {}
                    (Err(e), _, _) => {
                        let what = if data {
                            format!("*{name}")
                        } else {
                            name.clone()
                        };
                        let why = format!(
                            "its value at the call site {} cannot be computed in the caller's frame: {e}",
                            out.site
                        );
                        out.unknown.insert(what, why);
                    }
                }
            }
        }
        out
    }
}

/// gdb's `chain_candidate`: keeps of `result` the callers and callees that
/// `chain` shares with it; `None` once nothing is shared.
fn candidate(result: &mut Option<(Vec<usize>, usize, usize)>, chain: &[usize]) {
    let Some((sites, callers, callees)) = result else {
        *result = Some((chain.to_vec(), chain.len(), chain.len()));
        return;
    };
    let len = sites.len();
    let n = (*callers).min(chain.len());
    if let Some(i) = (0..n).find(|&i| sites[i] != chain[i]) {
        *callers = i;
    } else {
        *callers = n;
    }
    let n = (*callees).min(chain.len());
    if let Some(i) = (0..n).find(|&i| sites[len - 1 - i] != chain[chain.len() - 1 - i]) {
        *callees = i;
    } else {
        *callees = n;
    }
    if *callers == 0 && *callees == 0 {
        *result = None;
    }
}

/// What a caller-side expression is evaluated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wanted {
    /// `DW_AT_call_value`, `DW_AT_call_data_value`.
    Value,
    /// `DW_AT_call_target`: a register location stands for the register's value.
    Callee,
}

/// Evaluates a caller-side expression (`DW_AT_call_value`, `DW_AT_call_target`)
/// to the bytes of its value: a memory location stands for its address, as
/// gdb's appended `DW_OP_stack_value` makes it.
fn evaluate<T: Target + ?Sized>(
    expr: &[u8],
    kind: Wanted,
    encoding: Encoding,
    load_bias: u64,
    target: &mut T,
) -> Result<Vec<u8>, String> {
    let expr = moved(expr, encoding, load_bias);
    let decoded = Decoded::new(&expr, encoding).map_err(|e| e.to_string())?;
    let mut eval = decoded.evaluation(encoding);
    eval.evaluate_with(target).map_err(|e| e.to_string())?;
    let result = eval
        .take_result()
        .ok_or_else(|| "the expression left an empty stack".to_owned())?;
    if let Some(value) = result.to_value(encoding.address_size) {
        return Ok(value.to_bytes(encoding.address_size));
    }
    // A register location (clang's DW_AT_call_target `DW_OP_reg14`): gdb takes the
    // register's value, as it takes a memory location's address.
    if let (Wanted::Callee, Entry::Location(l)) = (kind, &result) {
        if let [place] = l.places.as_slice() {
            if let (Storage::Register(r), 0) = (&place.storage, place.bit_offset) {
                let mut buf = alloc::vec![0u8; usize::from(encoding.address_size)];
                if target.read_register(*r, 0, &mut buf) {
                    return Ok(buf);
                }
                return Err(format!("register {r} is not known in the caller's frame"));
            }
        }
    }
    Err("the expression gives a register or implicit location, not a value".to_owned())
}

/// `expr` with every `DW_OP_addr` moved by `load_bias`.
fn moved(expr: &[u8], encoding: Encoding, load_bias: u64) -> Vec<u8> {
    let mut out = expr.to_vec();
    if load_bias != 0 {
        binary::move_addresses(&mut out, encoding, load_bias);
    }
    out
}

/// The names of `sp`: its own, else those of the DIE it is a concrete instance or the
/// definition of (`DW_AT_abstract_origin`, `DW_AT_specification`), as gcc's out-of-line
/// copy of a function it also inlined names itself only through its abstract instance.
/// The chain is followed a few steps at most: hostile DWARF may make it a loop.
fn names_of<'a>(
    sp: &'a SubprogramDie,
    subprograms: &'a BTreeMap<u64, SubprogramDie>,
) -> &'a [String] {
    let mut at = sp;
    for _ in 0..8 {
        if !at.names.is_empty() {
            return &at.names;
        }
        match at.origin.and_then(|o| subprograms.get(&o)) {
            Some(next) => at = next,
            None => break,
        }
    }
    &[]
}

/// The callee of a call site whose origin is the DIE at `.debug_info` offset
/// `origin`: its entry if it is concrete, else the one concrete instance of
/// it, else the one concrete function of its name.
fn resolve_origin(
    origin: u64,
    subprograms: &BTreeMap<u64, SubprogramDie>,
    instances: &BTreeMap<u64, Vec<u64>>,
    by_name: &BTreeMap<&str, Vec<u64>>,
) -> Callee {
    let Some(sp) = subprograms.get(&origin) else {
        return Callee::Unknown(format!(
            "the call site's origin DIE {origin:#x} is not a function"
        ));
    };
    if let Some(e) = sp.entry {
        return Callee::Entry(e);
    }
    if let Some([one]) = instances.get(&origin).map(Vec::as_slice) {
        return Callee::Entry(*one);
    }
    for name in &sp.names {
        match by_name.get(name.as_str()).map(Vec::as_slice) {
            Some([one]) => return Callee::Entry(*one),
            Some([_, _, ..]) => {
                return Callee::Unknown(format!(
                    "the call site calls `{name}`, which names several functions"
                ))
            }
            _ => {}
        }
    }
    let name = sp.names.first().map_or("?", String::as_str);
    Callee::Unknown(format!(
        "the call site calls `{name}`, whose code has no DWARF here"
    ))
}

/// Reads a unit's subprograms and call sites.
/// The caller [`read_unit`] gives a call site of an abstract instance: [`CallSites::read`]
/// finds the concrete function by the site's PC once every function's ranges are known.
const CALLER_BY_PC: u64 = u64::MAX;

fn read_unit(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    index: usize,
    subprograms: &mut BTreeMap<u64, SubprogramDie>,
    sites: &mut Vec<SiteDie>,
) -> Result<(), Error> {
    let encoding = encoding_of(unit);
    let mut entries = unit.entries();
    let mut depth = 0isize;
    // Enclosing subprograms: (depth, entry; `None` for an abstract instance).
    let mut functions: Vec<(isize, Option<u64>)> = Vec::new();
    // The call site being read: (depth, index into `sites`).
    let mut site: Option<(isize, usize)> = None;
    while let Some((delta, entry)) = entries.next_dfs()? {
        depth += delta;
        while functions.last().is_some_and(|(d, _)| *d >= depth) {
            functions.pop();
        }
        if site.is_some_and(|(d, _)| d >= depth) {
            site = None;
        }
        let offset = debug_info_offset(unit, entry.offset());
        match entry.tag() {
            gimli::DW_TAG_subprogram => {
                let sp = subprogram(dwarf, unit, entry)?;
                functions.push((depth, sp.entry));
                subprograms.insert(offset, sp);
            }
            gimli::DW_TAG_call_site | gimli::DW_TAG_GNU_call_site => {
                // gcc -O3 may put a call site in an abstract instance (a function both
                // inlined and cloned): its return PC tells which concrete function calls.
                let caller = match functions.last() {
                    Some(&(_, Some(entry))) => entry,
                    Some(&(_, None)) => CALLER_BY_PC,
                    None => continue,
                };
                if let Some(s) = call_site(dwarf, unit, entry, caller, index)? {
                    site = Some((depth, sites.len()));
                    sites.push(s);
                }
            }
            gimli::DW_TAG_call_site_parameter | gimli::DW_TAG_GNU_call_site_parameter => {
                if let Some((d, i)) = site {
                    if depth == d + 1 {
                        if let Some(p) = parameter(unit, entry, encoding)? {
                            sites[i].site.parameters.push(p);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

type Die<'abbrev, 'unit, 'a> = gimli::DebuggingInformationEntry<'abbrev, 'unit, R<'a>>;

fn debug_info_offset(unit: &gimli::Unit<R<'_>>, offset: gimli::UnitOffset) -> u64 {
    offset
        .to_debug_info_offset(&unit.header)
        .map_or(u64::MAX, |o| o.0 as u64)
}

/// A reference attribute as a `.debug_info` offset.
fn reference(
    unit: &gimli::Unit<R<'_>>,
    entry: &Die<'_, '_, '_>,
    at: gimli::DwAt,
) -> Result<Option<u64>, Error> {
    Ok(match entry.attr_value(at)? {
        Some(AttributeValue::UnitRef(o)) => Some(debug_info_offset(unit, o)),
        Some(AttributeValue::DebugInfoRef(o)) => Some(o.0 as u64),
        _ => None,
    })
}

fn subprogram(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    entry: &Die<'_, '_, '_>,
) -> Result<SubprogramDie, Error> {
    let mut names = Vec::new();
    for at in [
        gimli::DW_AT_linkage_name,
        gimli::DW_AT_MIPS_linkage_name,
        gimli::DW_AT_name,
    ] {
        if let Some(v) = entry.attr_value(at)? {
            if let Ok(s) = dwarf.attr_string(unit, v) {
                names.push(s.to_string_lossy().into_owned());
            }
        }
    }
    let ranges = ranges(dwarf, unit, entry)?;
    let entry_pc = match entry.attr_value(gimli::DW_AT_entry_pc)? {
        Some(v) => dwarf.attr_address(unit, v).ok().flatten(),
        None => None,
    };
    let origin = match reference(unit, entry, gimli::DW_AT_abstract_origin)? {
        Some(o) => Some(o),
        None => reference(unit, entry, gimli::DW_AT_specification)?,
    };
    let frame_base = match entry.attr_value(gimli::DW_AT_frame_base)? {
        Some(AttributeValue::Exprloc(e)) => Some(e.0.slice().to_vec()),
        _ => None,
    };
    let noreturn = matches!(
        entry.attr_value(gimli::DW_AT_noreturn)?,
        Some(AttributeValue::Flag(true))
    );
    Ok(SubprogramDie {
        entry: entry_pc.or_else(|| ranges.first().map(|r| r.0)),
        ranges,
        origin,
        names,
        frame_base,
        noreturn,
    })
}

/// Whether gcc produced `unit` (`DW_AT_producer` "GNU C17 12.2.0 ...", "GNU C++17 ...").
fn produced_by_gcc(dwarf: &gimli::Dwarf<R<'_>>, unit: &gimli::Unit<R<'_>>) -> Result<bool, Error> {
    let mut entries = unit.entries();
    let Some((_, root)) = entries.next_dfs()? else {
        return Ok(false);
    };
    Ok(match root.attr_value(gimli::DW_AT_producer)? {
        Some(v) => dwarf
            .attr_string(unit, v)
            .is_ok_and(|s| s.slice().starts_with(b"GNU ")),
        None => false,
    })
}

/// A DIE's address ranges, in the order the DIE gives them (its
/// `DW_AT_low_pc`/`DW_AT_high_pc` range, or its `DW_AT_ranges`).
fn ranges(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    entry: &Die<'_, '_, '_>,
) -> Result<Vec<(u64, u64)>, Error> {
    if let Some(v) = entry.attr_value(gimli::DW_AT_ranges)? {
        let mut out = Vec::new();
        if let Some(mut list) = dwarf.attr_ranges(unit, v)? {
            while let Some(r) = list.next()? {
                if r.begin < r.end {
                    out.push((r.begin, r.end));
                }
            }
        }
        return Ok(out);
    }
    let low = match entry.attr_value(gimli::DW_AT_low_pc)? {
        Some(v) => dwarf.attr_address(unit, v)?,
        None => None,
    };
    let Some(low) = low else {
        return Ok(Vec::new());
    };
    let high = match entry.attr_value(gimli::DW_AT_high_pc)? {
        Some(AttributeValue::Udata(n)) => Some(low.saturating_add(n)),
        Some(v) => dwarf.attr_address(unit, v)?,
        None => None,
    };
    Ok(match high {
        Some(h) if h > low => alloc::vec![(low, h)],
        _ => Vec::new(),
    })
}

fn call_site(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    entry: &Die<'_, '_, '_>,
    caller: u64,
    index: usize,
) -> Result<Option<SiteDie>, Error> {
    let mut pc = None;
    for at in [
        gimli::DW_AT_call_return_pc,
        gimli::DW_AT_low_pc,
        gimli::DW_AT_call_pc,
    ] {
        if let Some(v) = entry.attr_value(at)? {
            pc = dwarf.attr_address(unit, v)?;
            if pc.is_some() {
                break;
            }
        }
    }
    let Some(pc) = pc else { return Ok(None) };
    let tail = [gimli::DW_AT_call_tail_call, gimli::DW_AT_GNU_tail_call]
        .into_iter()
        .map(|at| entry.attr_value(at))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .any(|v| matches!(v, Some(AttributeValue::Flag(true))));
    let mut callee = Callee::Unknown(format!(
        "the call site at {pc:#x} (file address) names no target (no DW_AT_call_origin or DW_AT_call_target)"
    ));
    for at in [gimli::DW_AT_call_target, gimli::DW_AT_GNU_call_site_target] {
        if let Some(AttributeValue::Exprloc(e)) = entry.attr_value(at)? {
            callee = Callee::Expression(e.0.slice().to_vec());
        }
    }
    let origin = match reference(unit, entry, gimli::DW_AT_call_origin)? {
        Some(o) => Some(o),
        None => reference(unit, entry, gimli::DW_AT_abstract_origin)?,
    };
    Ok(Some(SiteDie {
        site: Site {
            pc,
            caller,
            callee,
            parameters: Vec::new(),
            unit: index,
            returns_from_known: false,
        },
        origin,
        tail,
    }))
}

/// A call-site parameter: matched by its register (`DW_AT_location`
/// `DW_OP_regN`) or, without a location, by the formal parameter it binds.
fn parameter(
    unit: &gimli::Unit<R<'_>>,
    entry: &Die<'_, '_, '_>,
    encoding: Encoding,
) -> Result<Option<Parameter>, Error> {
    let key = match entry.attr_value(gimli::DW_AT_location)? {
        Some(AttributeValue::Exprloc(location)) => {
            match crate::decode(location.0.slice(), encoding)?.as_slice() {
                [(_, Op::Reg(r))] => Key::Register(u16::from(*r)),
                [(_, Op::Regx(r))] => match u16::try_from(*r) {
                    Ok(r) => Key::Register(r),
                    Err(_) => return Ok(None),
                },
                // Stack-passed parameters (gdb's fb_offset kind) are not matched.
                _ => return Ok(None),
            }
        }
        Some(_) => return Ok(None),
        None => {
            let origin = match reference(unit, entry, gimli::DW_AT_call_parameter)? {
                Some(o) => Some(o),
                None => reference(unit, entry, gimli::DW_AT_abstract_origin)?,
            };
            match origin {
                Some(o) => Key::Parameter(o),
                None => return Ok(None),
            }
        }
    };
    let block = |ats: [gimli::DwAt; 2]| -> Result<Option<Vec<u8>>, Error> {
        for at in ats {
            if let Some(AttributeValue::Exprloc(e)) = entry.attr_value(at)? {
                return Ok(Some(e.0.slice().to_vec()));
            }
        }
        Ok(None)
    };
    Ok(Some(Parameter {
        key,
        value: block([gimli::DW_AT_call_value, gimli::DW_AT_GNU_call_site_value])?,
        data_value: block([
            gimli::DW_AT_call_data_value,
            gimli::DW_AT_GNU_call_site_data_value,
        ])?,
    }))
}

impl core::fmt::Display for EntryValues {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.refused {
            Some(why) => write!(f, "no entry values: {why}"),
            None => write!(f, "entry values from the call site {}", self.site),
        }
    }
}
