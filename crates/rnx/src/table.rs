//! Plain-text tables: left-aligned columns two spaces apart, the last one
//! unpadded, no trailing blanks. Widths count characters, not bytes.

use std::io::{self, Write};

/// Writes `header` and `rows` (each as long as `header`).
pub fn write(o: &mut dyn Write, header: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut line = |cells: &mut dyn Iterator<Item = &str>| -> io::Result<()> {
        let mut s = String::new();
        for (i, cell) in cells.enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            s.push_str(cell);
            let pad = widths.get(i).copied().unwrap_or(0);
            s.extend(std::iter::repeat_n(
                ' ',
                pad.saturating_sub(cell.chars().count()),
            ));
        }
        writeln!(o, "{}", s.trim_end())
    };
    line(&mut header.iter().copied())?;
    for row in rows {
        line(&mut row.iter().map(String::as_str))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_line_up_by_characters() {
        let mut out = Vec::new();
        super::write(
            &mut out,
            &["NAME", "SIZE", "NOTE"],
            &[
                vec!["é-data".into(), "1.0 GiB".into(), "".into()],
                vec!["x".into(), "-".into(), "last".into()],
            ],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "NAME    SIZE     NOTE\né-data  1.0 GiB\nx       -        last\n"
        );
    }
}
