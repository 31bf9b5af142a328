//! Finding the root stores in a lowered module's text, to delete one and show that the
//! stress collector catches the missing root (the tour does, and so do the CLI's tests,
//! which include this file).

/// The lines of lowered IR that store a value into a GC frame's root slot: `store ptr
/// addrspace(10) %V, ptr %S` (or `addrspace(12)`) where `%S` is a `getelementptr` of word 2 or above of a
/// `%gcframe` alloca (words 0 and 1 are the header). Null stores are left out, and so are
/// slots the program loads from: those are allocas of the program's own that became frame
/// slots, whose stores carry its data (deleting one changes what the program computes).
pub fn root_stores(lowered: &str) -> Vec<usize> {
    let lines: Vec<&str> = lowered.lines().collect();
    // Value names are per function: look at one function's lines at a time.
    let mut out = Vec::new();
    let mut start = 0;
    while let Some(offset) = lines[start..].iter().position(|l| l.starts_with("define ")) {
        let begin = start + offset;
        let end = lines[begin..]
            .iter()
            .position(|l| *l == "}")
            .map_or(lines.len(), |e| begin + e);
        out.extend(root_stores_in(&lines, begin, end));
        start = end.min(lines.len() - 1) + 1;
        if start >= lines.len() {
            break;
        }
    }
    out
}

/// [`root_stores`] within the function on lines `begin..end`.
fn root_stores_in(lines: &[&str], begin: usize, end: usize) -> Vec<usize> {
    let body = &lines[begin..end];
    let mut slots = Vec::new();
    for line in body {
        let Some((name, rest)) = line
            .trim()
            .split_once(" = getelementptr inbounds ptr addrspace(10), ptr %gcframe")
        else {
            continue;
        };
        let index = rest.rsplit(' ').next().and_then(|i| i.parse::<u32>().ok());
        if index.is_some_and(|i| i >= 2) {
            slots.push(name.to_string());
        }
    }
    let loaded = |slot: &str| {
        body.iter().any(|l| {
            l.contains(" = load ") && l.contains(&format!(", ptr {slot},"))
                || l.contains(&format!(
                    " = getelementptr inbounds ptr addrspace(10), ptr {slot},"
                ))
        })
    };
    slots.retain(|s| !loaded(s));
    body.iter()
        .enumerate()
        .filter(|(_, line)| {
            // A tracked value, or a CalleeRooted argument its function roots.
            let line = line.trim();
            let Some(rest) = line
                .strip_prefix("store ptr addrspace(10) %")
                .or_else(|| line.strip_prefix("store ptr addrspace(12) %"))
            else {
                return false;
            };
            rest.split_once(", ptr ")
                .and_then(|(_, slot)| slot.split(',').next())
                .is_some_and(|slot| slots.iter().any(|s| s == slot))
        })
        .map(|(i, _)| begin + i)
        .collect()
}

/// `text` without line `skip`.
pub fn without_line(text: &str, skip: usize) -> String {
    let mut out: String = text
        .lines()
        .enumerate()
        .filter(|&(i, _)| i != skip)
        .map(|(_, l)| l)
        .collect::<Vec<_>>()
        .join("\n");
    out.push('\n');
    out
}
