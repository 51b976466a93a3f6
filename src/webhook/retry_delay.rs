//! The wait before a failed delivery is tried again: QStash's default backoff, or an expression
//! in QStash's `Upstash-Retry-Delay` form (milliseconds, over `retried`, the retries done so far:
//! 0 before the first retry), such as `pow(2, retried) * 1000`.

use std::fmt;
use std::time::Duration;

/// The longest wait, as QStash caps it: a day.
const MOST: Duration = Duration::from_secs(86_400);

/// How long to wait before each retry.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum RetryDelay {
    /// QStash's: `min(86400, e^(2.5 n))` seconds before the nth retry (12 s, 2.5 min, 30 min, 6 h,
    /// then a day).
    #[default]
    Backoff,
    /// Milliseconds, as the expression says (kept as written, to show it again).
    Expression(String, Expr),
}

impl RetryDelay {
    /// The delay in `text`, or what is wrong with it; empty is the default backoff.
    pub fn parse(text: &str) -> Result<RetryDelay, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(RetryDelay::Backoff);
        }
        let expr = Parser::new(text).whole()?;
        Ok(RetryDelay::Expression(text.to_string(), expr))
    }

    /// The wait before retry number `retry` (1 for the first).
    pub fn before(&self, retry: u32) -> Duration {
        let seconds = match self {
            RetryDelay::Backoff => (2.5 * f64::from(retry)).exp(),
            RetryDelay::Expression(_, expr) => expr.value(f64::from(retry.saturating_sub(1))) / 1e3,
        };
        if seconds.is_nan() || seconds <= 0.0 {
            return Duration::ZERO;
        }
        Duration::try_from_secs_f64(seconds).map_or(MOST, |wait| wait.min(MOST))
    }
}

impl fmt::Display for RetryDelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryDelay::Backoff => Ok(()),
            RetryDelay::Expression(text, _) => f.write_str(text),
        }
    }
}

/// An expression, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Number(f64),
    Retried,
    Negative(Box<Expr>),
    Binary(char, Box<Expr>, Box<Expr>),
    Call(Function, Vec<Expr>),
}

/// QStash's functions, each with its count of arguments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Function {
    Pow,
    Sqrt,
    Abs,
    Exp,
    Floor,
    Ceil,
    Round,
    Min,
    Max,
}

const FUNCTIONS: [(&str, Function, usize); 9] = [
    ("pow", Function::Pow, 2),
    ("sqrt", Function::Sqrt, 1),
    ("abs", Function::Abs, 1),
    ("exp", Function::Exp, 1),
    ("floor", Function::Floor, 1),
    ("ceil", Function::Ceil, 1),
    ("round", Function::Round, 1),
    ("min", Function::Min, 2),
    ("max", Function::Max, 2),
];

impl Expr {
    fn value(&self, retried: f64) -> f64 {
        match self {
            Expr::Number(number) => *number,
            Expr::Retried => retried,
            Expr::Negative(inner) => -inner.value(retried),
            Expr::Binary(op, left, right) => {
                let (left, right) = (left.value(retried), right.value(retried));
                match op {
                    '+' => left + right,
                    '-' => left - right,
                    '*' => left * right,
                    _ => left / right,
                }
            }
            Expr::Call(function, arguments) => {
                let x = arguments[0].value(retried);
                let y = || arguments[1].value(retried);
                match function {
                    Function::Pow => x.powf(y()),
                    Function::Sqrt => x.sqrt(),
                    Function::Abs => x.abs(),
                    Function::Exp => x.exp(),
                    Function::Floor => x.floor(),
                    Function::Ceil => x.ceil(),
                    Function::Round => x.round(),
                    Function::Min => x.min(y()),
                    Function::Max => x.max(y()),
                }
            }
        }
    }
}

/// A recursive-descent parser: `expr := term (('+'|'-') term)*`, `term := unary (('*'|'/')
/// unary)*`, `unary := '-' unary | number | retried | name '(' args ')' | '(' expr ')'`.
struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Parser<'a> {
        Parser { text, at: 0 }
    }

    fn whole(mut self) -> Result<Expr, String> {
        let expr = self.expr()?;
        self.skip_spaces();
        match self.peek() {
            None => Ok(expr),
            Some(c) => Err(self.wrong(&format!("unexpected {c:?}"))),
        }
    }

    fn wrong(&self, why: &str) -> String {
        format!(
            "{why} at character {} (an expression in milliseconds over `retried`, such as \
             pow(2, retried) * 1000)",
            self.at + 1
        )
    }

    fn skip_spaces(&mut self) {
        let rest = &self.text[self.at..];
        self.at += rest.len() - rest.trim_start().len();
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_spaces();
        self.text[self.at..].chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.at += c.len_utf8();
            return true;
        }
        false
    }

    fn expr(&mut self) -> Result<Expr, String> {
        let mut left = self.term()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.at += 1;
            left = Expr::Binary(op, Box::new(left), Box::new(self.term()?));
        }
        Ok(left)
    }

    fn term(&mut self) -> Result<Expr, String> {
        let mut left = self.unary()?;
        while let Some(op @ ('*' | '/')) = self.peek() {
            self.at += 1;
            left = Expr::Binary(op, Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat('-') {
            return Ok(Expr::Negative(Box::new(self.unary()?)));
        }
        if self.eat('(') {
            let inner = self.expr()?;
            if !self.eat(')') {
                return Err(self.wrong("expected )"));
            }
            return Ok(inner);
        }
        let rest = &self.text[self.at..];
        let word: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '_')
            .collect();
        if word.is_empty() {
            return Err(self.wrong("expected a number, retried or a function"));
        }
        if word.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            let number = word
                .parse::<f64>()
                .map_err(|_| self.wrong(&format!("{word:?} is not a number")))?;
            self.at += word.len();
            return Ok(Expr::Number(number));
        }
        if word == "retried" {
            self.at += word.len();
            return Ok(Expr::Retried);
        }
        let Some(&(_, function, count)) = FUNCTIONS.iter().find(|(name, _, _)| *name == word)
        else {
            return Err(self.wrong(&format!(
                "unknown name {word:?} (known: retried, pow, sqrt, abs, exp, floor, ceil, round, \
                 min, max)"
            )));
        };
        self.at += word.len();
        if !self.eat('(') {
            return Err(self.wrong(&format!("expected ( after {word}")));
        }
        let mut arguments = vec![self.expr()?];
        while self.eat(',') {
            arguments.push(self.expr()?);
        }
        if !self.eat(')') {
            return Err(self.wrong("expected ) or ,"));
        }
        if arguments.len() != count {
            return Err(self.wrong(&format!(
                "{word} takes {count} argument{}, not {}",
                if count == 1 { "" } else { "s" },
                arguments.len()
            )));
        }
        Ok(Expr::Call(function, arguments))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::RetryDelay;

    fn ms(text: &str, retry: u32) -> u128 {
        RetryDelay::parse(text).unwrap().before(retry).as_millis()
    }

    #[test]
    fn the_default_is_qstash_s_backoff_capped_at_a_day() {
        let backoff = RetryDelay::parse("").unwrap();
        assert_eq!(backoff.before(1).as_secs(), 12);
        assert_eq!(backoff.before(2).as_secs(), 148);
        assert_eq!(backoff.before(3).as_secs(), 1808);
        assert_eq!(backoff.before(5), Duration::from_secs(86_400));
        assert_eq!(backoff.before(1000), Duration::from_secs(86_400));
    }

    #[test]
    fn expressions_count_retried_from_zero_in_milliseconds() {
        assert_eq!(ms("1000", 1), 1000);
        assert_eq!(ms("pow(2, retried) * 1000", 1), 1000);
        assert_eq!(ms("pow(2, retried) * 1000", 4), 8000);
        assert_eq!(ms("1000 * (1 + retried)", 3), 3000);
        assert_eq!(ms("max(1000, pow(2, retried) * 100)", 1), 1000);
        assert_eq!(ms("7000 * retried", 1), 0);
        assert_eq!(ms("pow(retried, 2) * 1000", 3), 4000);
        assert_eq!(
            ms("floor(sqrt(10)) + ceil(0.2) - abs(-1) + round(0.6) / 2", 1),
            3
        );
        assert_eq!(ms("-5", 1), 0);
        assert_eq!(ms("exp(100)", 1), 86_400_000);
        assert_eq!(ms("1 / 0", 1), 86_400_000);
    }

    #[test]
    fn a_bad_expression_says_where() {
        for (text, said) in [
            ("pow(2)", "pow takes 2 arguments, not 1"),
            ("1000 *", "expected a number"),
            ("retries * 2", "unknown name \"retries\""),
            ("(1 + 2", "expected )"),
            ("10s", "\"10s\" is not a number"),
            ("1 2", "unexpected '2' at character 3"),
        ] {
            let why = RetryDelay::parse(text).unwrap_err();
            assert!(why.contains(said), "{text}: {why}");
        }
    }
}
