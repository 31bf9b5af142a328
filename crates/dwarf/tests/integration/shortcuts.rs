//! The shortcuts for the commonest expressions (a lone `DW_OP_regN`, a
//! constant then `DW_OP_stack_value`) leave exactly what the general loop
//! leaves: the same result, operation index and step-limit error, from the
//! bytes and from decoded operations, as a traced evaluation (which never
//! takes a shortcut) of the same operations.

#![allow(clippy::unwrap_used)]

use locus_dwarf::{encode, Encoding, Entry, Evaluation, EvaluationResult, Op};

/// Runs `eval` to the end (stepping through a trace); the result, the
/// operation index, or the error's text.
fn run(eval: &mut Evaluation<'_>) -> Result<(Option<Entry>, usize), String> {
    let mut r = eval.evaluate().map_err(|e| e.to_string())?;
    while r == EvaluationResult::Stepped {
        r = eval.evaluate().map_err(|e| e.to_string())?;
    }
    assert_eq!(r, EvaluationResult::Complete);
    Ok((eval.result().cloned(), eval.pc()))
}

/// Every way in for `ops`: decoded, decoded and traced, from the bytes, from
/// the bytes and traced, each with `max_steps` and, if `pushed`, an entry
/// pushed first.
fn all_ways(ops: &[Op], enc: Encoding, max_steps: u64, pushed: Option<&Entry>) {
    let bytes = encode(ops, enc).unwrap();
    let mut answers = Vec::new();
    for (from_bytes, trace) in [(false, true), (false, false), (true, true), (true, false)] {
        let mut eval = if from_bytes {
            Evaluation::new(&bytes, enc)
        } else {
            Evaluation::new(ops, enc)
        };
        eval.set_trace(trace);
        eval.set_max_steps(max_steps);
        if let Some(e) = pushed {
            eval.push(e.clone());
        }
        answers.push(run(&mut eval));
    }
    for a in &answers[1..] {
        assert_eq!(
            a, &answers[0],
            "{ops:?} ({enc:?}, max_steps {max_steps}, pushed {pushed:?})"
        );
    }
}

#[test]
fn shortcuts_leave_what_the_loop_leaves() {
    let mut cases = vec![vec![Op::Reg(0)], vec![Op::Reg(31)]];
    for c in [
        Op::Lit(0),
        Op::Lit(31),
        Op::Constu(0x1_0000_0001),
        Op::Constu(u64::MAX >> 1),
        Op::Consts(-1),
        Op::Consts(-0x8000_0001),
    ] {
        cases.push(vec![c, Op::StackValue]);
    }
    // Not shortcuts (a longer constant form, a register then stack_value).
    cases.push(vec![Op::Const1u(7), Op::StackValue]);
    cases.push(vec![Op::Reg(3), Op::StackValue]);
    let pushed = Entry::Value(locus_dwarf::Value::generic(5, 8));
    let mut n = 0;
    for ops in &cases {
        for address_size in [4, 8] {
            let enc = Encoding {
                address_size,
                ..Encoding::default()
            };
            for max_steps in [0, 1, 2, 100] {
                all_ways(ops, enc, max_steps, None);
                all_ways(ops, enc, max_steps, Some(&pushed));
                n += 2;
            }
        }
    }
    assert_eq!(n, cases.len() * 16);
}
