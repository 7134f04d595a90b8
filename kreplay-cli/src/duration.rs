//! Parsing durations given on the command line (`10s`, `500ms`, `2m`, `1h`).
use std::time::Duration;

/// Parses `<number><unit>` with unit `ms`, `s`, `m` or `h` (a bare number means seconds).
pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration '{text}': expected e.g. 10s, 500ms, 2m"))?;
    let secs = match unit {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "invalid duration '{text}': unknown unit '{unit}' (use ms, s, m, h)"
            ));
        }
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("invalid duration '{text}': must be positive"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
    }

    #[test]
    fn rejects_garbage_with_the_input_quoted() {
        assert_eq!(
            parse("ten"),
            Err("invalid duration 'ten': expected e.g. 10s, 500ms, 2m".into())
        );
        assert_eq!(
            parse("10x"),
            Err("invalid duration '10x': unknown unit 'x' (use ms, s, m, h)".into())
        );
        assert_eq!(
            parse("0s"),
            Err("invalid duration '0s': must be positive".into())
        );
    }
}
