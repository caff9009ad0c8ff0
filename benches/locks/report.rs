//! Results: one JSON line per scenario on stdout, then a Markdown table of everything.

use serde_json::{Map, Value, json};

/// A target check.
pub struct Check {
    pub metric: String,
    pub target: String,
    pub value: f64,
    pub met: bool,
}

/// One row of the Markdown table.
#[derive(Default)]
pub struct Row {
    pub metric: String,
    pub lib: String,
    pub raw: String,
    pub rslock: String,
    pub ratio: String,
    pub target: String,
    pub met: Option<bool>,
}

impl Row {
    pub fn new(metric: impl Into<String>) -> Self {
        Row {
            metric: metric.into(),
            ..Row::default()
        }
    }
    pub fn lib(mut self, v: impl Into<String>) -> Self {
        self.lib = v.into();
        self
    }
    pub fn raw(mut self, v: impl Into<String>) -> Self {
        self.raw = v.into();
        self
    }
    pub fn rslock(mut self, v: impl Into<String>) -> Self {
        self.rslock = v.into();
        self
    }
    pub fn ratio(mut self, v: impl Into<String>) -> Self {
        self.ratio = v.into();
        self
    }
    pub fn target(mut self, target: impl Into<String>, met: bool) -> Self {
        self.target = target.into();
        self.met = Some(met);
        self
    }
}

/// Everything one scenario reports.
pub struct Outcome {
    pub id: &'static str,
    pub title: String,
    pub data: Map<String, Value>,
    pub rows: Vec<Row>,
    pub checks: Vec<Check>,
    /// Correctness failures (violations, lost locks, errors): the run exits non-zero.
    pub failures: Vec<String>,
    pub seconds: f64,
}

impl Outcome {
    pub fn new(id: &'static str, title: impl Into<String>) -> Self {
        Outcome {
            id,
            title: title.into(),
            data: Map::new(),
            rows: Vec::new(),
            checks: Vec::new(),
            failures: Vec::new(),
            seconds: 0.0,
        }
    }

    pub fn set(&mut self, key: &str, value: Value) {
        self.data.insert(key.to_owned(), value);
    }

    /// Records a target check and returns whether it was met.
    pub fn check(&mut self, metric: &str, target: &str, value: f64, met: bool) -> bool {
        self.checks.push(Check {
            metric: metric.to_owned(),
            target: target.to_owned(),
            value,
            met,
        });
        met
    }

    pub fn row(&mut self, row: Row) {
        self.rows.push(row);
    }

    pub fn fail(&mut self, why: impl Into<String>) {
        self.failures.push(why.into());
    }

    /// `None` when the scenario has no target.
    pub fn met(&self) -> Option<bool> {
        if self.checks.is_empty() {
            None
        } else {
            Some(self.checks.iter().all(|c| c.met))
        }
    }

    /// The JSON line, starting with `{"scenario":"<id>",` so it can be grepped.
    pub fn json_line(&self, quick: bool) -> String {
        let mut rest = self.data.clone();
        rest.insert("title".into(), json!(self.title));
        rest.insert("quick".into(), json!(quick));
        rest.insert("seconds".into(), json!(super::util::r2(self.seconds)));
        rest.insert(
            "targets".into(),
            Value::Array(
                self.checks
                    .iter()
                    .map(|c| {
                        json!({
                            "metric": c.metric,
                            "target": c.target,
                            "value": if c.value.is_finite() { json!(super::util::r2(c.value)) } else { Value::Null },
                            "met": c.met,
                        })
                    })
                    .collect(),
            ),
        );
        rest.insert("met".into(), json!(self.met()));
        rest.insert("failures".into(), json!(self.failures));
        rest.insert("ok".into(), json!(self.failures.is_empty()));
        let body = Value::Object(rest).to_string();
        format!(
            "{{\"scenario\":{},{}",
            Value::String(self.id.to_owned()),
            &body[1..]
        )
    }
}

/// The summary table for all outcomes.
pub fn markdown(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    out.push_str(
        "| Scenario | Metric | redis-locks | raw SET NX + EVALSHA | rslock 0.10 | ratio | Target | Met |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|---|:---:|\n");
    for outcome in outcomes {
        let mut first = true;
        let label = format!("{} {}", outcome.id, outcome.title);
        let mut rows: Vec<&Row> = outcome.rows.iter().collect();
        let failure_row;
        if !outcome.failures.is_empty() {
            failure_row = Row::new("FAILURES")
                .lib(outcome.failures.join("; "))
                .target("none", false);
            rows.push(&failure_row);
        }
        for row in rows {
            let met = match row.met {
                Some(true) => "yes",
                Some(false) => "**NO**",
                None => "",
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                if first { label.as_str() } else { "" },
                row.metric,
                cell(&row.lib),
                cell(&row.raw),
                cell(&row.rslock),
                cell(&row.ratio),
                row.target,
                met
            ));
            first = false;
        }
    }
    out
}

fn cell(s: &str) -> &str {
    if s.is_empty() { "–" } else { s }
}

/// Formats a number with a precision suited to its size.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "∞".into();
    }
    let a = x.abs();
    if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// `a / b` as "1.23×".
pub fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 {
        "–".into()
    } else {
        format!("{:.2}×", a / b)
    }
}
