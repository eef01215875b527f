//! `percentes query JOURNAL "SQL"`: an ad-hoc question in polars SQL over a verified journal's
//! frames (SPEC §9 "Queries", issue 19 item 3).
//!
//! The answer comes from the journal alone. The statement is read before it runs and refused
//! when it is anything but one query, or when it reads a table the journal did not give (polars
//! SQL's `read_parquet`, `read_csv` and other table functions read files). The journal is loaded
//! as `analyze` loads it, so an unverifiable one is refused there, and the run is analyzed under
//! the chosen spec version so that the answer carries the report's NOT PUBLISHABLE reasons and
//! its windows: a query is a diagnosis, never a published number, and says so when the report
//! would.
//!
//! The tables ([`TABLES`]): `requests` is the export's request frame with each request's
//! `window` added; `events` and `telemetry` are the export's other frames; `windows` is the
//! report's timeline in ns.

use std::fmt;
#[cfg(feature = "query")]
use std::ops::ControlFlow;

#[cfg(feature = "query")]
use polars::prelude::IntoLazy;
#[cfg(feature = "query")]
use polars::sql::SQLContext;
use polars_core::prelude::*;
#[cfg(feature = "query")]
use sqlparser::ast::{Statement, TableFactor, Visit, Visitor};
#[cfg(feature = "query")]
use sqlparser::dialect::GenericDialect;
#[cfg(feature = "query")]
use sqlparser::parser::Parser;

use percentes_formats::spec::Spec;

use crate::export;
use crate::load::Run;
use crate::model::{Analyzer, WindowBounds};
use crate::Files;

/// The tables a query may read, with what one row of each is.
pub const TABLES: &[(&str, &str)] = &[
    (
        "requests",
        "one row per scheduled request: the export's columns, and `window` (the window its intended time falls in under the spec applied)",
    ),
    ("events", "one row per event record (fault, pool, replica, host facts)"),
    ("telemetry", "one row per telemetry sample of the recorder's self-check"),
    (
        "windows",
        "one row per window of the report's timeline: window, start_ns, end_ns (exclusive), scheduled",
    ),
    (
        "server",
        "one row per reading of the server's own metrics (SPEC §2): source, sent_ns, received_ns, restarted, family, name, labels, role, reading (value, increase or base), value",
    ),
];

/// Whether this build answers queries: the `query` cargo feature, off by default (polars' SQL
/// engine more than doubles a clean build and brings an HTTP client stack; BENCHMARKS.md).
pub const AVAILABLE: bool = cfg!(feature = "query");

/// Why a statement is not run.
#[derive(Debug)]
pub enum QueryError {
    /// This build has no SQL engine ([`AVAILABLE`] is false).
    Unavailable,
    /// The statement is refused before it runs: what is wrong with it.
    Refused(Refusal),
    /// polars could not plan or run it.
    Polars(PolarsError),
}

/// Why a statement is refused before it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It does not parse as SQL.
    NotSql {
        /// What the parser said.
        message: String,
    },
    /// Not one statement but this many.
    Statements(usize),
    /// A statement other than a query.
    NotAQuery,
    /// It reads something other than the journal's tables.
    ReadsOutside {
        /// What it reads.
        what: String,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotSql { message } => write!(f, "it does not parse as SQL: {message}"),
            Refusal::Statements(n) => write!(f, "one statement is asked, and this is {n}"),
            Refusal::NotAQuery => f.write_str(
                "only a query (SELECT, or WITH ... SELECT) is answered; nothing is created, changed or explained",
            ),
            Refusal::ReadsOutside { what } => write!(
                f,
                "it reads {what}, which is not this journal: an answer comes from the verified journal's tables alone"
            ),
        }
    }
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tables: Vec<&str> = TABLES.iter().map(|(name, _)| *name).collect();
        match self {
            QueryError::Unavailable => write!(
                f,
                "this percentes was built without `query`: build it with `cargo build --release --features query` \
                 (polars' SQL engine; it more than doubles a clean build and brings an HTTP client stack, BENCHMARKS.md), \
                 or export the journal (`percentes export JOURNAL --parquet FILE`) and ask DuckDB"
            ),
            QueryError::Refused(why) => write!(f, "query refused: {why}"),
            QueryError::Polars(error) => write!(
                f,
                "the query failed: {error}\n(the tables are {}; `SELECT * FROM requests LIMIT 1` shows a table's columns)",
                tables.join(", ")
            ),
        }
    }
}

impl std::error::Error for QueryError {}

impl From<PolarsError> for QueryError {
    fn from(error: PolarsError) -> Self {
        QueryError::Polars(error)
    }
}

/// Finds the first table the statement would read from anywhere but the journal.
#[cfg(feature = "query")]
struct Sources(Option<String>);

#[cfg(feature = "query")]
impl Visitor for Sources {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        let outside = match factor {
            TableFactor::Table {
                name,
                args: Some(_),
                ..
            } => Some(format!("the table function {name}(...)")),
            TableFactor::TableFunction { expr, .. } => Some(format!("TABLE({expr})")),
            TableFactor::Function { name, .. } => Some(format!("the table function {name}(...)")),
            _ => None,
        };
        match outside {
            Some(what) => {
                self.0 = Some(what);
                ControlFlow::Break(())
            }
            None => ControlFlow::Continue(()),
        }
    }
}

/// Reads `sql` and refuses it unless it is one query over the journal's own tables.
#[cfg(not(feature = "query"))]
pub fn check(_sql: &str) -> Result<(), QueryError> {
    Err(QueryError::Unavailable)
}

/// Reads `sql` and refuses it unless it is one query over the journal's own tables.
#[cfg(feature = "query")]
pub fn check(sql: &str) -> Result<(), QueryError> {
    let refused = QueryError::Refused;
    let statements = Parser::parse_sql(&GenericDialect, sql).map_err(|e| {
        refused(Refusal::NotSql {
            message: e.to_string(),
        })
    })?;
    let [statement] = statements.as_slice() else {
        return Err(refused(Refusal::Statements(statements.len())));
    };
    if !matches!(statement, Statement::Query(_)) {
        return Err(refused(Refusal::NotAQuery));
    }
    let mut sources = Sources(None);
    let _ = statement.visit(&mut sources);
    if let Some(what) = sources.0 {
        return Err(refused(Refusal::ReadsOutside { what }));
    }
    Ok(())
}

/// The journal's tables, ready to be asked.
#[derive(Debug)]
#[cfg_attr(not(feature = "query"), allow(dead_code))]
pub struct Tables {
    requests: DataFrame,
    events: DataFrame,
    telemetry: DataFrame,
    windows: DataFrame,
    server: DataFrame,
}

impl Tables {
    /// The tables of `run`, its requests placed in `windows` (the report's timeline, which tiles
    /// the schedule). The request frame is built a batch at a time from the table
    /// ([`export::request_batches`]), so a spilled table is never copied whole onto the heap
    /// beside the frame.
    pub fn new(run: Run, windows: &[WindowBounds]) -> PolarsResult<Self> {
        Self::in_batches(run, windows, export::BATCH_ROWS)
    }

    /// [`Tables::new`] with the request frame made `batch_rows` rows at a time.
    fn in_batches(run: Run, windows: &[WindowBounds], batch_rows: usize) -> PolarsResult<Self> {
        // The timeline's windows tile the schedule in order (SPEC §3 "Windows").
        let window_of = |t: u64| {
            let i = windows.partition_point(|w| w.end_ns <= t);
            windows.get(i).filter(|w| w.start_ns <= t).map(|w| w.window)
        };
        let (phases, routes) = export::labels(&run.header);
        let mut requests = DataFrame::empty();
        let mut next = 0;
        for batch in export::request_batches(&run.requests, &phases, &routes, batch_rows) {
            let mut batch = batch?;
            let rows = next..next + batch.height();
            next = rows.end;
            let window: Vec<Option<&str>> = run.requests.intended_ns[rows]
                .iter()
                .map(|&t| window_of(t))
                .collect();
            batch.insert_column(1, Column::new("window".into(), window))?;
            if requests.width() == 0 {
                requests = batch;
            } else {
                requests.vstack_mut_owned(batch)?;
            }
        }
        drop(run.requests);
        let table = DataFrame::new(
            windows.len(),
            vec![
                Column::new(
                    "window".into(),
                    windows.iter().map(|w| w.window).collect::<Vec<_>>(),
                ),
                // Signed, as the requests' times are (export.rs), so they compare and subtract.
                Column::new(
                    "start_ns".into(),
                    windows
                        .iter()
                        .map(|w| i64::try_from(w.start_ns).unwrap_or(i64::MAX))
                        .collect::<Vec<_>>(),
                ),
                Column::new(
                    "end_ns".into(),
                    windows
                        .iter()
                        .map(|w| i64::try_from(w.end_ns).unwrap_or(i64::MAX))
                        .collect::<Vec<_>>(),
                ),
                Column::new(
                    "scheduled".into(),
                    windows.iter().map(|w| w.scheduled).collect::<Vec<_>>(),
                ),
            ],
        )?;
        Ok(Tables {
            requests,
            events: export::events_frame(&run.events)?,
            telemetry: export::telemetry_frame(&run.telemetry)?,
            server: export::server_frame(&run.scrapes)?,
            windows: table,
        })
    }

    /// Runs `sql` over the tables, after [`check`].
    #[cfg(not(feature = "query"))]
    pub fn ask(self, _sql: &str) -> Result<DataFrame, QueryError> {
        Err(QueryError::Unavailable)
    }

    /// Runs `sql` over the tables, after [`check`].
    #[cfg(feature = "query")]
    pub fn ask(self, sql: &str) -> Result<DataFrame, QueryError> {
        check(sql)?;
        let mut context = SQLContext::new();
        context.register("requests", self.requests.lazy());
        context.register("events", self.events.lazy());
        context.register("telemetry", self.telemetry.lazy());
        context.register("windows", self.windows.lazy());
        context.register("server", self.server.lazy());
        Ok(context.execute(sql)?.collect()?)
    }
}

/// A query's answer, printed, with the verdict of the run it was asked of.
#[derive(Debug)]
pub struct Answer {
    /// The answer in the format asked for.
    pub text: String,
    /// The report's NOT PUBLISHABLE reasons (in `text` too, except for CSV).
    pub not_publishable: Vec<String>,
    /// Whether the run passed its gates (`analyze` exits 2 when not, and so does `query`).
    pub valid: bool,
}

/// Everything `percentes query` does with a loaded run: analyze it under `spec` as `analyze`
/// would (its windows and its NOT PUBLISHABLE reasons), build the tables, run `sql`, print.
pub fn answer<'a>(
    run: Run,
    files: impl Into<Files<'a>>,
    spec: Spec,
    analyzer: &Analyzer,
    sql: &str,
    format: Format,
) -> Result<Answer, QueryError> {
    check(sql)?;
    let report = crate::analysis::analyze(&run, files, spec, analyzer);
    let frame = Tables::new(run, &report.timeline.windows)?.ask(sql)?;
    Ok(Answer {
        text: render(&frame, format, &report.not_publishable)?,
        not_publishable: report.not_publishable,
        valid: report.validity.valid,
    })
}

/// How an answer is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for a terminal, numbers right-aligned, absent values as `null`.
    Table,
    /// RFC 4180 CSV with a header row; an absent value is an empty field.
    Csv,
    /// One JSON object: the columns with their types, the rows as arrays, and the NOT
    /// PUBLISHABLE reasons.
    Json,
}

impl std::str::FromStr for Format {
    type Err = NoFormat;

    fn from_str(name: &str) -> Result<Format, NoFormat> {
        match name {
            "table" => Ok(Format::Table),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            other => Err(NoFormat {
                name: other.to_owned(),
            }),
        }
    }
}

/// A `--format` that is none of table, csv and json.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoFormat {
    /// The name given.
    pub name: String,
}

impl std::fmt::Display for NoFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no format {:?}: table, csv or json", self.name)
    }
}

impl std::error::Error for NoFormat {}

/// One cell as text: exact integers, floats in their shortest round-trip form, strings bare.
fn text(value: &AnyValue<'_>) -> Option<String> {
    Some(match value {
        AnyValue::Null => return None,
        AnyValue::String(s) => (*s).to_owned(),
        AnyValue::StringOwned(s) => s.to_string(),
        AnyValue::Float32(v) => v.to_string(),
        AnyValue::Float64(v) => v.to_string(),
        other => other.to_string(),
    })
}

fn json_value(value: &AnyValue<'_>) -> serde_json::Value {
    use serde_json::Value;
    match value {
        AnyValue::Null => Value::Null,
        AnyValue::Boolean(b) => Value::Bool(*b),
        AnyValue::UInt8(v) => (*v).into(),
        AnyValue::UInt16(v) => (*v).into(),
        AnyValue::UInt32(v) => (*v).into(),
        AnyValue::UInt64(v) => (*v).into(),
        AnyValue::Int8(v) => (*v).into(),
        AnyValue::Int16(v) => (*v).into(),
        AnyValue::Int32(v) => (*v).into(),
        AnyValue::Int64(v) => (*v).into(),
        // NaN and the infinities have no JSON form.
        AnyValue::Float32(v) => {
            serde_json::Number::from_f64(f64::from(*v)).map_or(Value::Null, Value::Number)
        }
        AnyValue::Float64(v) => serde_json::Number::from_f64(*v).map_or(Value::Null, Value::Number),
        other => text(other).map_or(Value::Null, Value::String),
    }
}

fn numeric(dtype: &DataType) -> bool {
    dtype.is_primitive_numeric()
}

fn csv_field(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

/// The answer printed in `format`; `not_publishable` is the report's list (JSON carries it; the
/// table puts it above the rows; CSV leaves it to the caller, who prints it on standard error so
/// the file stays plain CSV).
pub fn render(
    answer: &DataFrame,
    format: Format,
    not_publishable: &[String],
) -> PolarsResult<String> {
    let columns = answer.columns();
    let rows = answer.height();
    // Every cell as text, for the two text formats (JSON keeps numbers as numbers).
    let texts = || -> PolarsResult<Vec<Vec<Option<String>>>> {
        columns
            .iter()
            .map(|column| (0..rows).map(|row| Ok(text(&column.get(row)?))).collect())
            .collect()
    };
    Ok(match format {
        Format::Csv => {
            let cells = texts()?;
            let mut out = String::new();
            let header: Vec<String> = columns
                .iter()
                .map(|c| csv_field(c.name().as_str()))
                .collect();
            out.push_str(&header.join(","));
            out.push_str("\r\n");
            for row in 0..rows {
                let line: Vec<String> = cells
                    .iter()
                    .map(|c| c[row].as_deref().map(csv_field).unwrap_or_default())
                    .collect();
                out.push_str(&line.join(","));
                out.push_str("\r\n");
            }
            out
        }
        Format::Table => {
            let cells = texts()?;
            let mut out = String::new();
            for why in not_publishable {
                out.push_str(why);
                out.push('\n');
            }
            if !not_publishable.is_empty() {
                out.push('\n');
            }
            let widths: Vec<usize> = columns
                .iter()
                .zip(&cells)
                .map(|(c, values)| {
                    values
                        .iter()
                        .map(|v| v.as_deref().unwrap_or("null").chars().count())
                        .chain([c.name().chars().count()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |values: Vec<(String, bool)>| -> String {
                let parts: Vec<String> = values
                    .into_iter()
                    .zip(&widths)
                    .map(|((v, right), &w)| {
                        if right {
                            format!("{v:>w$}")
                        } else {
                            format!("{v:<w$}")
                        }
                    })
                    .collect();
                parts.join("  ").trim_end().to_owned() + "\n"
            };
            out.push_str(&line(
                columns
                    .iter()
                    .map(|c| (c.name().to_string(), numeric(c.dtype())))
                    .collect(),
            ));
            out.push_str(&line(
                widths.iter().map(|&w| ("-".repeat(w), false)).collect(),
            ));
            for row in 0..rows {
                out.push_str(&line(
                    columns
                        .iter()
                        .zip(&cells)
                        .map(|(c, values)| {
                            (
                                values[row].clone().unwrap_or_else(|| "null".into()),
                                numeric(c.dtype()),
                            )
                        })
                        .collect(),
                ));
            }
            out.push_str(&format!(
                "({rows} row{})\n",
                if rows == 1 { "" } else { "s" }
            ));
            out
        }
        Format::Json => {
            let mut json_rows = Vec::with_capacity(rows);
            for row in 0..rows {
                let mut values = Vec::with_capacity(columns.len());
                for column in columns {
                    values.push(json_value(&column.get(row)?));
                }
                json_rows.push(serde_json::Value::Array(values));
            }
            let object = serde_json::json!({
                "not_publishable": not_publishable,
                "columns": columns
                    .iter()
                    .map(|c| serde_json::json!({"name": c.name().as_str(), "dtype": c.dtype().to_string()}))
                    .collect::<Vec<_>>(),
                "rows": json_rows,
            });
            let mut text = serde_json::to_string_pretty(&object).map_err(|e| {
                PolarsError::ComputeError(format!("cannot write the answer as JSON: {e}").into())
            })?;
            text.push('\n');
            text
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "query")]
    fn a_query_is_the_only_statement_answered() {
        check("SELECT count(*) FROM requests").unwrap();
        check("WITH w AS (SELECT * FROM windows) SELECT window FROM w").unwrap();
        for (refused, kind) in [
            ("DELETE FROM requests", Some(Refusal::NotAQuery)),
            (
                "CREATE TABLE t AS SELECT * FROM requests",
                Some(Refusal::NotAQuery),
            ),
            ("DROP TABLE requests", Some(Refusal::NotAQuery)),
            ("SELECT 1; SELECT 2", Some(Refusal::Statements(2))),
            ("SELEC 1", None),
            ("", Some(Refusal::Statements(0))),
        ] {
            match check(refused) {
                Err(QueryError::Refused(refusal)) => match kind {
                    Some(kind) => assert_eq!(refusal, kind, "{refused:?}"),
                    None => assert!(
                        matches!(refusal, Refusal::NotSql { .. }),
                        "{refused:?}: {refusal}"
                    ),
                },
                other => panic!("{refused:?} was not refused: {other:?}"),
            }
        }
    }

    #[test]
    #[cfg(feature = "query")]
    fn a_table_function_reading_a_file_is_refused_wherever_it_hides() {
        for sql in [
            "SELECT * FROM read_parquet('other.parquet')",
            "SELECT * FROM requests WHERE index IN (SELECT index FROM read_csv('x.csv'))",
            "SELECT * FROM requests r JOIN read_ipc('x.arrow') x ON r.index = x.index",
            "WITH x AS (SELECT * FROM read_json('x.json')) SELECT * FROM x",
        ] {
            let error = check(sql).unwrap_err().to_string();
            assert!(
                error.contains("not this journal") && error.contains("read_"),
                "{sql}: {error}"
            );
        }
    }

    /// The request table is stacked from batches (so a spilled table is never copied whole);
    /// how it is cut must not change a row, a null, a type or a window. A synthetic run in one
    /// batch against the same run in batches of 5 rows, out of spill files.
    #[test]
    fn the_request_table_stacked_from_batches_is_the_one_made_whole() {
        use percentes_formats::journal::synthetic;
        let dir = percentes_testkit::Scratch::new("query-b");
        let path = dir.join("run.pj");
        std::fs::write(&path, synthetic::small_sealed()).unwrap();
        let file = crate::JournalFile::open(&path).unwrap();
        let spilled = crate::load::Options {
            table_memory: 0,
            spill_dir: dir.to_path_buf(),
            ..Default::default()
        };
        let load = |options: &crate::load::Options| {
            let verified = vec![file.verify(&Default::default())];
            crate::load::load_verified_with(std::slice::from_ref(&file), verified, options).unwrap()
        };
        let heap = load(&Default::default());
        let rows = heap.requests.len();
        assert!(rows > 10, "{rows}");
        let analyzer = Analyzer {
            version: "test".into(),
            commit: "test".into(),
            diagnose: true,
            by: Vec::new(),
        };
        let windows = crate::analysis::analyze(&heap, &file, Spec::CURRENT, &analyzer)
            .timeline
            .windows;
        let whole = Tables::new(heap, &windows).unwrap().requests;
        let cut = Tables::in_batches(load(&spilled), &windows, 5)
            .unwrap()
            .requests;
        assert_eq!(whole.height(), rows);
        assert_eq!(whole.first_col_n_chunks(), 1);
        assert_eq!(cut.first_col_n_chunks(), rows.div_ceil(5));
        assert_eq!(whole.schema(), cut.schema());
        assert!(whole.equals_missing(&cut), "{whole}\n{cut}");
        let named = whole.column("window").unwrap().str().unwrap();
        assert!(
            named.null_count() < rows,
            "no request was placed in a window"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn frame() -> DataFrame {
        DataFrame::new(
            3,
            vec![
                Column::new("name".into(), [Some("a,b"), None, Some("say \"hi\"")]),
                Column::new("n".into(), [Some(1u64), Some(u64::MAX), None]),
                Column::new("x".into(), [0.1f64, f64::NAN, 2.5]),
            ],
        )
        .unwrap()
    }

    #[test]
    fn csv_quotes_what_it_must_and_leaves_nulls_empty() {
        let csv = render(&frame(), Format::Csv, &["NOT PUBLISHABLE: x".into()]).unwrap();
        assert_eq!(
            csv,
            "name,n,x\r\n\"a,b\",1,0.1\r\n,18446744073709551615,NaN\r\n\"say \"\"hi\"\"\",,2.5\r\n"
        );
    }

    #[test]
    fn json_keeps_integers_exact_and_carries_the_reasons() {
        let json = render(&frame(), Format::Json, &["NOT PUBLISHABLE: x".into()]).unwrap();
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["not_publishable"][0], "NOT PUBLISHABLE: x");
        assert_eq!(value["columns"][1]["name"], "n");
        assert_eq!(value["columns"][1]["dtype"], "u64");
        assert_eq!(value["rows"][1][1].as_u64(), Some(u64::MAX));
        assert!(value["rows"][1][0].is_null());
        assert!(value["rows"][1][2].is_null(), "NaN is null in JSON");
        assert_eq!(value["rows"][0][2].as_f64(), Some(0.1));
    }

    #[test]
    fn the_table_aligns_numbers_right_and_leads_with_the_reasons() {
        let table = render(&frame(), Format::Table, &["NOT PUBLISHABLE: x".into()]).unwrap();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "NOT PUBLISHABLE: x");
        assert_eq!(lines[1], "");
        assert_eq!(lines[2], "name                         n    x");
        assert_eq!(lines[4], "a,b                          1  0.1");
        assert_eq!(lines[5], "null      18446744073709551615  NaN");
        assert_eq!(lines[7], "(3 rows)");
    }
}
