//! [`Table`] and [`Report`]: figures printed as they come, and collected for the Markdown file
//! and the chart.

use std::fmt::Write as _;

/// One table of figures.
#[derive(Debug, Clone)]
pub struct Table {
    /// What it measures.
    pub title: String,
    /// Column headers.
    pub columns: Vec<String>,
    /// Rows of cells, as many as columns.
    pub rows: Vec<Vec<String>>,
    /// Notes printed under it: settings, what a dash means.
    pub notes: Vec<String>,
}

impl Table {
    /// An empty table titled `title` with `columns`.
    pub fn new(title: impl Into<String>, columns: &[&str]) -> Self {
        Self {
            title: title.into(),
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.columns.len(), "{}", self.title);
        self.rows.push(cells);
    }

    /// Adds a note.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// The table as Markdown, its columns padded so it reads as text too.
    pub fn markdown(&self) -> String {
        let mut widths: Vec<usize> = self.columns.iter().map(|c| c.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut out = String::from("|");
            for (cell, width) in cells.iter().zip(&widths) {
                let _ = write!(out, " {cell:<width$} |");
            }
            out.push('\n');
            out
        };
        let mut out = format!("### {}\n\n", self.title);
        out.push_str(&line(&self.columns));
        out.push('|');
        for width in &widths {
            let _ = write!(out, "{}|", "-".repeat(width + 2));
        }
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for note in &self.notes {
                let _ = writeln!(out, "- {note}");
            }
        }
        out
    }
}

/// One point of the chart: cycles per second of one backend at one concurrency.
#[derive(Debug, Clone)]
pub struct ChartPoint {
    /// The backend.
    pub backend: String,
    /// Concurrent tasks.
    pub tasks: usize,
    /// The library's median rate.
    pub library: f64,
    /// The bare statements' median rate.
    pub bare: f64,
}

/// Everything one run measured.
#[derive(Debug, Default)]
pub struct Report {
    /// The tables, in the order they were measured.
    pub tables: Vec<Table>,
    /// The chart's points.
    pub chart: Vec<ChartPoint>,
}

impl Report {
    /// Prints `table` and keeps it.
    pub fn add(&mut self, table: Table) {
        println!("{}", table.markdown());
        self.tables.push(table);
    }
}
