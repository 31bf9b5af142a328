//! `locus_signals`: each case runs in a child process (this test binary,
//! re-run on one test with an environment variable set), since a fault ends the process.

#[path = "support/fault_child.rs"]
mod fault_child;

use std::process::{Command, Output};

use fault_child::locus_lines;

use locus_signals::{self as signals, CodeRange, FAULT_EXIT_STATUS};

const CHILD: &str = "LOCUS_SIGNALS_CHILD";

/// Every thread of this test binary is made through `program_pthread_create`, as every
/// thread of the `locus` binary is: Rust's `std::thread` (libtest's threads included)
/// binds to this definition when linking.
///
/// # Safety
///
/// As for `pthread_create(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: Option<extern "C" fn(*mut std::ffi::c_void) -> *mut std::ffi::c_void>,
    arg: *mut std::ffi::c_void,
) -> std::ffi::c_int {
    // SAFETY: the caller's promise, forwarded.
    unsafe { signals::program_pthread_create(thread, attr, start, arg) }
}

/// Runs test `name` of this binary in a child process with [`CHILD`] set.
fn child(name: &str) -> Output {
    fault_child::run(name, CHILD, "1").unwrap_or_else(|e| panic!("{e}"))
}

/// The one `locus:` line of a child that ended with [`FAULT_EXIT_STATUS`].
fn fault_line(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(FAULT_EXIT_STATUS), "{out:?}");
    let mut lines = locus_lines(out);
    assert_eq!(lines.len(), 1, "{out:?}");
    lines.remove(0)
}

fn in_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

#[inline(never)]
fn read_through(p: *const u64) -> u64 {
    // SAFETY: none; the tests call it with null to fault.
    unsafe { p.read_volatile() }
}

/// A load whose instruction is in this function at any optimisation level.
#[inline(never)]
extern "C" fn load_in_asm(p: *const u64) -> u64 {
    let v: u64;
    // SAFETY: none; the tests call it with null to fault.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!("mov {v}, qword ptr [{p}]", p = in(reg) p, v = out(reg) v, options(nostack));
    }
    // SAFETY: as above.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        std::arch::asm!("ldr {v}, [{p}]", p = in(reg) p, v = out(reg) v, options(nostack));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        v = read_through(p);
    }
    v
}

/// Recurses until the stack runs out (`black_box` hides that it never stops).
#[inline(never)]
fn recurse(n: u64) -> u64 {
    let buf = std::hint::black_box([n; 64]);
    if std::hint::black_box(n) == u64::MAX {
        return 0;
    }
    recurse(n + 1).wrapping_add(buf[3])
}

/// Inside a fault scope, a null dereference ends the process with status 3 and one line
/// naming the signal and the address.
#[test]
fn a_fault_in_a_scope_is_one_line_and_status_3() {
    if in_child() {
        assert!(signals::install());
        let _scope = signals::fault_scope(false);
        read_through(std::hint::black_box(std::ptr::null()));
        std::process::exit(0);
    }
    let line = fault_line(&child("a_fault_in_a_scope_is_one_line_and_status_3"));
    assert!(
        line.starts_with("locus: SIGSEGV (null pointer dereference) at address 0x0"),
        "{}",
        line
    );
}

/// Registered code is named by the name it was registered with, and a fault in it is
/// claimed even outside a scope.
#[test]
fn a_fault_in_registered_code_names_the_function() {
    if in_child() {
        assert!(signals::install());
        let start = load_in_asm as extern "C" fn(*const u64) -> u64 as usize;
        let _code = signals::register_code([CodeRange {
            start,
            len: 256,
            name: "my_reader".into(),
        }]);
        load_in_asm(std::hint::black_box(std::ptr::null()));
        std::process::exit(0);
    }
    let line = fault_line(&child("a_fault_in_registered_code_names_the_function"));
    assert!(
        line.contains(" in function `my_reader` (JIT-compiled code, pc 0x"),
        "{}",
        line
    );
    assert!(line.contains(" = my_reader+0x"), "{}", line);
}

/// Registrations past the table's first block of 1024 still count: with 1100 live (the
/// first 1099 at low addresses no code has), a fault in the last one's function is claimed
/// outside any scope and named. When the table held 1024, the last was silently dropped
/// and the fault passed on (SIGSEGV, no line).
#[test]
fn registrations_past_1024_are_claimed_and_named() {
    if in_child() {
        assert!(signals::install());
        let mut live: Vec<signals::CodeRegistration> = (0..1099usize)
            .map(|i| {
                signals::register_code([CodeRange {
                    start: 0x1000 + i * 16,
                    len: 16,
                    name: format!("filler{i}"),
                }])
            })
            .collect();
        let start = load_in_asm as extern "C" fn(*const u64) -> u64 as usize;
        live.push(signals::register_code([CodeRange {
            start,
            len: 256,
            name: "reader_1100".into(),
        }]));
        load_in_asm(std::hint::black_box(std::ptr::null()));
        std::process::exit(0);
    }
    let line = fault_line(&child("registrations_past_1024_are_claimed_and_named"));
    assert!(
        line.contains(" in function `reader_1100` (JIT-compiled code, pc 0x"),
        "{}",
        line
    );
}

/// `reporting_scope` installs the handlers itself: with no `install` before it, a fault
/// in it is reported with status 3.
#[test]
fn a_reporting_scope_installs_and_claims() {
    if in_child() {
        let _scope = signals::reporting_scope();
        read_through(std::hint::black_box(std::ptr::null()));
        std::process::exit(0);
    }
    let line = fault_line(&child("a_reporting_scope_installs_and_claims"));
    assert!(
        line.starts_with("locus: SIGSEGV (null pointer dereference) at address 0x0"),
        "{}",
        line
    );
}

/// Stack overflow on a thread of its own: the handler runs on the alternate stack
/// `install` gave the thread, and names the overflow.
#[test]
fn a_stack_overflow_in_a_scope_is_reported() {
    if in_child() {
        let worker = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(|| {
                assert!(signals::install());
                let _scope = signals::fault_scope(false);
                recurse(0)
            })
            .unwrap();
        let _ = worker.join();
        std::process::exit(0);
    }
    let line = fault_line(&child("a_stack_overflow_in_a_scope_is_reported"));
    assert!(
        line.starts_with("locus: SIGSEGV (stack overflow) at address 0x"),
        "{}",
        line
    );
}

/// Outside a scope and registered code, a fault is not ours: it goes to the handler that
/// was there before (Rust's, which lets the default action kill the process), with no
/// `locus:` line.
#[test]
fn other_faults_are_passed_on() {
    if in_child() {
        assert!(signals::install());
        read_through(std::hint::black_box(std::ptr::null()));
        std::process::exit(0);
    }
    let out = child("other_faults_are_passed_on");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{out:?}");
    assert!(locus_lines(&out).is_empty(), "{out:?}");
}

/// A scope asking for `abort` ends the process with SIGABRT after the line.
#[test]
fn an_aborting_scope_aborts() {
    if in_child() {
        assert!(signals::install());
        let _scope = signals::fault_scope(true);
        read_through(std::hint::black_box(std::ptr::null()));
        std::process::exit(0);
    }
    let out = child("an_aborting_scope_aborts");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{out:?}");
    assert_eq!(locus_lines(&out).len(), 1, "{out:?}");
}

/// Scopes end: after one is dropped, faults are passed on again.
#[test]
fn a_dropped_scope_claims_nothing() {
    if in_child() {
        assert!(signals::install());
        drop(signals::fault_scope(false));
        read_through(std::hint::black_box(std::ptr::null()));
        std::process::exit(0);
    }
    let out = child("a_dropped_scope_claims_nothing");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{out:?}");
}

/// A handler that faults itself, installed before ours: ours chains to it.
extern "C" fn faulting_handler(
    _: std::ffi::c_int,
    _: *mut libc::siginfo_t,
    _: *mut std::ffi::c_void,
) {
    read_through(std::hint::black_box(std::ptr::null()));
}

/// A fault inside the handler (here: inside the handler it chains to) is one line and
/// the fault exit status, not a silent death by a blocked SIGSEGV.
#[test]
fn a_second_fault_in_the_handler_is_reported() {
    if in_child() {
        // SAFETY: a zeroed sigaction is a valid value to fill in.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = faulting_handler
            as extern "C" fn(std::ffi::c_int, *mut libc::siginfo_t, *mut std::ffi::c_void)
            as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO;
        // SAFETY: installs a valid action.
        unsafe { libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut()) };
        assert!(signals::install());
        read_through(std::hint::black_box(std::ptr::null()));
        std::process::exit(0);
    }
    let out = child("a_second_fault_in_the_handler_is_reported");
    assert_eq!(out.status.code(), Some(FAULT_EXIT_STATUS), "{out:?}");
    assert_eq!(
        locus_lines(&out),
        ["locus: SIGSEGV inside the fault handler (a second fault while reporting one)"],
        "{out:?}"
    );
}

/// Raises `sig` inside a fault scope.
fn raise_in_a_scope(sig: std::ffi::c_int) {
    assert!(signals::install());
    let _scope = signals::fault_scope(false);
    // SAFETY: raising a signal; its handler ends the process.
    unsafe { libc::raise(sig) };
    std::process::exit(0);
}

/// `abort()` while a program runs: one line, the fault status (was: a silent SIGABRT).
#[test]
fn abort_in_a_scope_is_reported() {
    if in_child() {
        raise_in_a_scope(libc::SIGABRT);
    }
    let out = child("abort_in_a_scope_is_reported");
    assert_eq!(out.status.code(), Some(FAULT_EXIT_STATUS), "{out:?}");
    let expected = "locus: SIGABRT (abort called in this process)";
    assert_eq!(locus_lines(&out), [expected], "{out:?}");
}

/// `raise()` of a signal that ends the process, while a program runs: the same.
#[test]
fn raise_in_a_scope_is_reported() {
    if in_child() {
        raise_in_a_scope(libc::SIGUSR1);
    }
    let out = child("raise_in_a_scope_is_reported");
    assert_eq!(out.status.code(), Some(FAULT_EXIT_STATUS), "{out:?}");
    let expected = "locus: SIGUSR1 (sent by this process to itself: raise or kill)";
    assert_eq!(locus_lines(&out), [expected], "{out:?}");
}

/// Outside any scope a raised signal keeps its default action, with no line.
#[test]
fn raise_outside_a_scope_is_passed_on() {
    if in_child() {
        assert!(signals::install());
        // SAFETY: raising a signal whose default action ends the process.
        unsafe { libc::raise(libc::SIGUSR1) };
        std::process::exit(0);
    }
    let out = child("raise_outside_a_scope_is_passed_on");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGUSR1), "{out:?}");
    assert!(locus_lines(&out).is_empty(), "{out:?}");
}

extern "C" fn overflow(_: *mut std::ffi::c_void) -> *mut std::ffi::c_void {
    recurse(0) as *mut std::ffi::c_void
}

/// A thread made through `program_pthread_create` that overflows its stack, while a
/// program runs on another thread: reported as a stack overflow (a thread with no
/// alternate stack would be killed by the kernel, silently).
#[test]
fn a_program_thread_overflow_is_reported() {
    if in_child() {
        assert!(signals::install());
        let _scope = signals::fault_scope(false);
        let mut thread: libc::pthread_t = 0;
        // SAFETY: valid out-pointer, default attributes, a start routine that only
        // recurses.
        let made = unsafe {
            signals::program_pthread_create(
                &mut thread,
                std::ptr::null(),
                Some(overflow),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(made, 0);
        // SAFETY: a thread made above, joined once.
        unsafe { libc::pthread_join(thread, std::ptr::null_mut()) };
        std::process::exit(0);
    }
    let line = fault_line(&child("a_program_thread_overflow_is_reported"));
    assert!(
        line.starts_with("locus: SIGSEGV (stack overflow) at address 0x"),
        "{}",
        line
    );
}

/// This thread's alternate signal stack: (address, size), or `None` if it has none.
fn alt_stack() -> Option<(usize, usize)> {
    // SAFETY: a zeroed stack_t is a valid out-value.
    let mut current: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    let queried = unsafe { libc::sigaltstack(std::ptr::null(), &mut current) } == 0;
    (queried && current.ss_flags & libc::SS_DISABLE == 0)
        .then_some((current.ss_sp as usize, current.ss_size))
}

/// The number of mappings of this process.
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap_or_else(|e| panic!("{e}"))
        .lines()
        .count()
}

/// A `std::thread` gets the 64 KiB alternate stack before its body runs (Rust's own, which
/// it makes only for a thread without one, is 8 to 16 KiB), and the stack is freed when the
/// thread ends: 300 threads one after another leave the number of mappings as it was.
#[test]
fn std_threads_get_the_alternate_stack_and_free_it() {
    if in_child() {
        assert!(signals::install());
        let first = std::thread::spawn(alt_stack)
            .join()
            .unwrap_or_else(|_| panic!());
        let (_, size) = first.unwrap_or_else(|| panic!("no alternate stack"));
        assert!(size >= 64 << 10, "{size}");
        let before = mappings();
        for _ in 0..300 {
            let got = std::thread::spawn(alt_stack)
                .join()
                .unwrap_or_else(|_| panic!());
            assert!(got.is_some_and(|(_, size)| size >= 64 << 10), "{got:?}");
        }
        let after = mappings();
        assert!(after < before + 30, "{before} mappings, then {after}");
        std::process::exit(0);
    }
    let out = child("std_threads_get_the_alternate_stack_and_free_it");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// `C-unwind`, as a C function is: `pthread_exit` unwinds through it (a `"C"` Rust function
/// would abort the process there).
extern "C-unwind" fn exit_early(arg: *mut std::ffi::c_void) -> *mut std::ffi::c_void {
    assert!(alt_stack().is_some());
    // SAFETY: ends this thread (made by pthread_create) with `arg` as its value; nothing
    // of this frame needs dropping.
    unsafe { libc::pthread_exit(arg) }
}

/// A thread that ends by `pthread_exit` unwinds through `program_pthread_create`'s first
/// function (a forced unwind) and is joined with its value; the process is not aborted.
#[test]
fn pthread_exit_passes_through() {
    if in_child() {
        assert!(signals::install());
        let mut thread: libc::pthread_t = 0;
        let value = 0x5eed_usize as *mut std::ffi::c_void;
        type Start = extern "C" fn(*mut std::ffi::c_void) -> *mut std::ffi::c_void;
        // SAFETY: the same calling convention; "C-unwind" also lets unwinding pass, as
        // `program_pthread_create` calls it.
        let start = unsafe {
            std::mem::transmute::<
                extern "C-unwind" fn(*mut std::ffi::c_void) -> *mut std::ffi::c_void,
                Start,
            >(exit_early)
        };
        // SAFETY: valid out-pointer, default attributes, a start routine that exits.
        let made = unsafe {
            signals::program_pthread_create(&mut thread, std::ptr::null(), Some(start), value)
        };
        assert_eq!(made, 0);
        let mut result = std::ptr::null_mut();
        // SAFETY: a thread made above, joined once.
        assert_eq!(unsafe { libc::pthread_join(thread, &mut result) }, 0);
        assert_eq!(result, value);
        std::process::exit(0);
    }
    let out = child("pthread_exit_passes_through");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// The page [`page_claimer`] answers for (0: none yet), and its answer: 0 pass, 1 make the
/// page readable and retry, 2 end with status 7.
static CLAIMED_PAGE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static ANSWER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A claimer as a component would write one: faults in its own page are its business.
fn page_claimer(fault: &signals::Fault<'_>, message: &mut dyn std::fmt::Write) -> signals::Claim {
    use std::sync::atomic::Ordering::SeqCst;
    let page = CLAIMED_PAGE.load(SeqCst);
    if page == 0 || fault.signal != libc::SIGSEGV || !(page..page + 4096).contains(&fault.addr) {
        return signals::Claim::Pass;
    }
    match ANSWER.load(SeqCst) {
        1 => {
            // SAFETY: the test's own page; `mprotect` is async-signal-safe.
            unsafe { libc::mprotect(page as *mut _, 4096, libc::PROT_READ) };
            signals::Claim::Retry
        }
        2 => {
            let _ = write!(message, "test: page {page:#x} is the claimer's");
            signals::Claim::Exit(7)
        }
        _ => signals::Claim::Pass,
    }
}

/// A claimer is asked first: `Exit` prints its message with `, caught as SIGSEGV` and ends
/// with its status; `Retry` lets the access run again once it made the page readable (the
/// read then gives the page's 0); `Pass` leaves the fault to the scope (status 3). The
/// claimer is set once: the same one again is accepted, another refused.
#[test]
fn a_claimer_is_asked_first() {
    const NAME: &str = "a_claimer_is_asked_first";
    const MODE: &str = "LOCUS_SIGNALS_CLAIM";
    use std::sync::atomic::Ordering::SeqCst;
    if in_child() {
        let answer: usize = std::env::var(MODE)
            .ok()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        assert!(signals::install());
        // page_claimer reads one atomic and calls mprotect before Retry; the closure does
        // nothing.
        // SAFETY: as just said.
        assert!(unsafe { signals::set_claimer(page_claimer) });
        // SAFETY: as above.
        assert!(unsafe { signals::set_claimer(page_claimer) });
        // SAFETY: as above.
        assert!(!unsafe { signals::set_claimer(|_, _| signals::Claim::Pass) });
        // SAFETY: a fresh anonymous mapping, touching nothing else.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(page, libc::MAP_FAILED);
        ANSWER.store(answer, SeqCst);
        CLAIMED_PAGE.store(page as usize, SeqCst);
        let _scope = signals::fault_scope(false);
        let v = read_through(std::hint::black_box(page.cast()));
        println!("read {v}");
        std::process::exit(0);
    }
    let run = |answer: &str| {
        let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
        Command::new(exe)
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env(MODE, answer)
            .output()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let out = run("2");
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    let lines = locus_lines(&out);
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(
        lines[0].starts_with("locus: test: page 0x")
            && lines[0].contains(" is the claimer's, caught as SIGSEGV"),
        "{}",
        lines[0]
    );
    let out = run("1");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("read 0"),
        "{out:?}"
    );
    assert!(locus_lines(&out).is_empty(), "{out:?}");
    let line = fault_line(&run("0"));
    assert!(
        line.starts_with("locus: SIGSEGV (access not permitted) at address 0x"),
        "{line}"
    );
}
