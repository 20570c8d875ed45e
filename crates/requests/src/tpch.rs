//! A TPC-H-shaped database and query mix, generated without the TPC kit.
//!
//! **Schema**: TPC-H's eight tables minus `partsupp`, with the columns the templates use
//! (`region`, `nation`, `supplier`, `customer`, `part`, `orders`, `lineitem`).
//!
//! **Generator** (inside the server, `INSERT ... SELECT generate_series`): every random column
//! is `cp_h(key, salt)`, a fixed integer hash (`(key·2654435761 + salt·1000003) mod (2³¹−1)`,
//! then one Lehmer step `·48271 mod (2³¹−1)`), so the same scale gives the same rows on every
//! run. Sizes follow TPC-H per scale factor SF: 10 000·SF suppliers, 150 000·SF customers,
//! 200 000·SF parts, 1 500 000·SF orders, 1–7 line items per order (≈ 6 000 000·SF). Order
//! dates are uniform over 1992-01-01..1998-08-02; ship = order + 1..121 days, commit = order +
//! 30..90, receipt = ship + 1..30; return flag R/A (even/odd hash) if received by 1995-06-17,
//! else N; line status F if shipped by 1995-06-17, else O; five market segments, five order
//! priorities, seven ship modes, part types `{STANDARD..PROMO} {ANODIZED..BRUSHED} {TIN..COPPER}`.
//!
//! **Templates**: Q1, Q3, Q4, Q5, Q6, Q10, Q12 and Q14 after TPC-H, parameters drawn per request
//! from a seeded generator; each has the row count its result must have, checked on every
//! request (the result's shape is fixed by the template: groups, `LIMIT`, one aggregate row).

use rand::Rng;

/// Tables in load order with their DDL.
pub const SCHEMA: &str = "
CREATE FUNCTION cp_h(k bigint, salt int) RETURNS bigint IMMUTABLE LANGUAGE sql AS
  $$ SELECT mod(mod(k * 2654435761 + salt * 1000003, 2147483647) * 48271, 2147483647) $$;
CREATE TABLE region (r_regionkey int PRIMARY KEY, r_name text NOT NULL);
CREATE TABLE nation (n_nationkey int PRIMARY KEY, n_name text NOT NULL, n_regionkey int NOT NULL);
CREATE TABLE supplier (s_suppkey int PRIMARY KEY, s_name text, s_nationkey int NOT NULL,
  s_acctbal numeric(12,2));
CREATE TABLE customer (c_custkey int PRIMARY KEY, c_name text, c_nationkey int NOT NULL,
  c_mktsegment text NOT NULL, c_acctbal numeric(12,2), c_phone text, c_address text);
CREATE TABLE part (p_partkey int PRIMARY KEY, p_name text, p_type text NOT NULL, p_brand text,
  p_size int, p_retailprice numeric(12,2));
CREATE TABLE orders (o_orderkey bigint PRIMARY KEY, o_custkey int NOT NULL,
  o_orderstatus char(1), o_totalprice numeric(12,2), o_orderdate date NOT NULL,
  o_orderpriority text NOT NULL, o_shippriority int NOT NULL);
CREATE TABLE lineitem (l_orderkey bigint NOT NULL, l_partkey int NOT NULL, l_suppkey int NOT NULL,
  l_linenumber int NOT NULL, l_quantity numeric(12,2), l_extendedprice numeric(12,2),
  l_discount numeric(12,2), l_tax numeric(12,2), l_returnflag char(1), l_linestatus char(1),
  l_shipdate date, l_commitdate date, l_receiptdate date, l_shipinstruct text, l_shipmode text,
  l_comment text);
";

/// The data load for scale factor `sf` (SQL text; sizes rounded, at least one of each).
pub fn load_sql(sf: f64) -> String {
    let n = |base: f64| ((base * sf).round() as i64).max(1);
    let (supp, cust, part, ord) = (n(10_000.0), n(150_000.0), n(200_000.0), n(1_500_000.0));
    format!(
        "
INSERT INTO region VALUES (0,'AFRICA'),(1,'AMERICA'),(2,'ASIA'),(3,'EUROPE'),(4,'MIDDLE EAST');
INSERT INTO nation SELECT i, 'NATION' || i, i % 5 FROM generate_series(0, 24) i;
INSERT INTO supplier SELECT i, 'Supplier#' || i, cp_h(i, 1) % 25, (cp_h(i, 2) % 1100000 - 99999) / 100.0
  FROM generate_series(1, {supp}) i;
INSERT INTO customer SELECT i, 'Customer#' || i, cp_h(i, 3) % 25,
  (ARRAY['AUTOMOBILE','BUILDING','FURNITURE','MACHINERY','HOUSEHOLD'])[1 + cp_h(i, 4) % 5],
  (cp_h(i, 5) % 1100000 - 99999) / 100.0, '10-' || cp_h(i, 6) % 1000, md5(i::text)
  FROM generate_series(1, {cust}) i;
INSERT INTO part SELECT i, 'part ' || md5(i::text),
  (ARRAY['STANDARD','SMALL','MEDIUM','LARGE','ECONOMY','PROMO'])[1 + cp_h(i, 7) % 6] || ' ' ||
  (ARRAY['ANODIZED','BURNISHED','PLATED','POLISHED','BRUSHED'])[1 + cp_h(i, 8) % 5] || ' ' ||
  (ARRAY['TIN','NICKEL','BRASS','STEEL','COPPER'])[1 + cp_h(i, 9) % 5],
  'Brand#' || (1 + cp_h(i, 10) % 5) || (1 + cp_h(i, 11) % 5), 1 + cp_h(i, 12) % 50,
  (90000 + (i / 10) % 20001 + 100 * (i % 1000)) / 100.0
  FROM generate_series(1, {part}) i;
INSERT INTO orders SELECT o, 1 + cp_h(o, 13) % {cust}, 'O', (cp_h(o, 14) % 50000000) / 100.0,
  date '1992-01-01' + (cp_h(o, 15) % 2405)::int,
  (ARRAY['1-URGENT','2-HIGH','3-MEDIUM','4-NOT SPECIFIED','5-LOW'])[1 + cp_h(o, 16) % 5], 0
  FROM generate_series(1, {ord}) o;
INSERT INTO lineitem
SELECT o_orderkey, p, 1 + cp_h(o_orderkey * 8 + n, 18) % {supp}, n, q,
  q * (90000 + (p / 10) % 20001 + 100 * (p % 1000)) / 100.0,
  (cp_h(o_orderkey * 8 + n, 19) % 11) / 100.0, (cp_h(o_orderkey * 8 + n, 20) % 9) / 100.0,
  CASE WHEN rd <= date '1995-06-17' THEN (CASE WHEN cp_h(o_orderkey * 8 + n, 21) % 2 = 0 THEN 'R' ELSE 'A' END)
       ELSE 'N' END,
  CASE WHEN sd > date '1995-06-17' THEN 'O' ELSE 'F' END,
  sd, o_orderdate + 30 + (cp_h(o_orderkey * 8 + n, 22) % 61)::int, rd,
  (ARRAY['DELIVER IN PERSON','COLLECT COD','NONE','TAKE BACK RETURN'])[1 + cp_h(o_orderkey * 8 + n, 23) % 4],
  (ARRAY['REG AIR','AIR','RAIL','SHIP','TRUCK','MAIL','FOB'])[1 + cp_h(o_orderkey * 8 + n, 24) % 7],
  md5((o_orderkey * 8 + n)::text)
FROM (SELECT o_orderkey, o_orderdate, n,
        1 + cp_h(o_orderkey * 8 + n, 17) % {part} AS p,
        1 + cp_h(o_orderkey * 8 + n, 25) % 50 AS q,
        o_orderdate + 1 + (cp_h(o_orderkey * 8 + n, 26) % 121)::int AS sd,
        o_orderdate + 1 + (cp_h(o_orderkey * 8 + n, 26) % 121)::int + 1 + (cp_h(o_orderkey * 8 + n, 27) % 30)::int AS rd
      FROM orders, generate_series(1, 7) n
      WHERE n <= 1 + cp_h(o_orderkey, 2) % 7) x;
CREATE INDEX lineitem_orderkey ON lineitem (l_orderkey);
CREATE INDEX orders_custkey ON orders (o_custkey);
ANALYZE;
"
    )
}

/// Rows a template's result must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Exactly this many.
    Exactly(u64),
    /// Between these (inclusive): the count depends on the data, the bound on the template.
    Between(u64, u64),
}

impl Expect {
    /// Whether `n` rows fit.
    pub fn accepts(self, n: u64) -> bool {
        match self {
            Expect::Exactly(e) => n == e,
            Expect::Between(a, b) => (a..=b).contains(&n),
        }
    }
}

/// One query template.
pub struct Template {
    /// Label (`Q1`, ...).
    pub name: &'static str,
    /// What the result must look like.
    pub expect: Expect,
    /// SQL with this request's parameters.
    pub sql: fn(&mut dyn rand::RngCore) -> String,
}

const SEGMENTS: [&str; 5] = [
    "AUTOMOBILE",
    "BUILDING",
    "FURNITURE",
    "MACHINERY",
    "HOUSEHOLD",
];
const REGIONS: [&str; 5] = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"];
const MODES: [&str; 7] = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"];

fn pick<'a>(r: &mut dyn rand::RngCore, xs: &[&'a str]) -> &'a str {
    xs[r.gen_range(0..xs.len())]
}

/// The eight templates.
pub const TEMPLATES: &[Template] = &[
    Template {
        name: "Q1",
        expect: Expect::Exactly(4),
        sql: |r| {
            format!(
                "SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice),
                 sum(l_extendedprice * (1 - l_discount)),
                 sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)), avg(l_quantity),
                 avg(l_extendedprice), avg(l_discount), count(*)
                 FROM lineitem WHERE l_shipdate <= date '1998-12-01' - {} GROUP BY 1, 2 ORDER BY 1, 2",
                r.gen_range(60..=120)
            )
        },
    },
    Template {
        name: "Q3",
        expect: Expect::Exactly(10),
        sql: |r| {
            let d = format!("1995-03-{:02}", r.gen_range(1..=31));
            format!(
                "SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate,
                 o_shippriority FROM customer, orders, lineitem
                 WHERE c_mktsegment = '{}' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
                 AND o_orderdate < date '{d}' AND l_shipdate > date '{d}'
                 GROUP BY l_orderkey, o_orderdate, o_shippriority
                 ORDER BY revenue DESC, o_orderdate LIMIT 10",
                pick(r, &SEGMENTS)
            )
        },
    },
    Template {
        name: "Q4",
        expect: Expect::Exactly(5),
        sql: |r| {
            let y = r.gen_range(1993..=1997);
            let m = 1 + 3 * r.gen_range(0..4);
            format!(
                "SELECT o_orderpriority, count(*) FROM orders
                 WHERE o_orderdate >= date '{y}-{m:02}-01'
                 AND o_orderdate < date '{y}-{m:02}-01' + interval '3 month'
                 AND EXISTS (SELECT 1 FROM lineitem WHERE l_orderkey = o_orderkey
                             AND l_commitdate < l_receiptdate)
                 GROUP BY 1 ORDER BY 1"
            )
        },
    },
    Template {
        name: "Q5",
        expect: Expect::Between(1, 5),
        sql: |r| {
            let y = r.gen_range(1993..=1997);
            format!(
                "SELECT n_name, sum(l_extendedprice * (1 - l_discount)) AS revenue
                 FROM customer, orders, lineitem, supplier, nation, region
                 WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND l_suppkey = s_suppkey
                 AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey
                 AND n_regionkey = r_regionkey AND r_name = '{}'
                 AND o_orderdate >= date '{y}-01-01' AND o_orderdate < date '{y}-01-01' + interval '1 year'
                 GROUP BY n_name ORDER BY revenue DESC",
                pick(r, &REGIONS)
            )
        },
    },
    Template {
        name: "Q6",
        expect: Expect::Exactly(1),
        sql: |r| {
            let y = r.gen_range(1993..=1997);
            let d = r.gen_range(2..=9);
            format!(
                "SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
                 WHERE l_shipdate >= date '{y}-01-01' AND l_shipdate < date '{y}-01-01' + interval '1 year'
                 AND l_discount BETWEEN {:.2} AND {:.2} AND l_quantity < {}",
                f64::from(d - 1) / 100.0,
                f64::from(d + 1) / 100.0,
                r.gen_range(24..=25)
            )
        },
    },
    Template {
        name: "Q10",
        expect: Expect::Exactly(20),
        sql: |r| {
            let y = r.gen_range(1993..=1994);
            let m = 1 + 3 * r.gen_range(0..4);
            format!(
                "SELECT c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) AS revenue,
                 c_acctbal, n_name, c_address, c_phone
                 FROM customer, orders, lineitem, nation
                 WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey
                 AND o_orderdate >= date '{y}-{m:02}-01'
                 AND o_orderdate < date '{y}-{m:02}-01' + interval '3 month'
                 AND l_returnflag = 'R' AND c_nationkey = n_nationkey
                 GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address
                 ORDER BY revenue DESC LIMIT 20"
            )
        },
    },
    Template {
        name: "Q12",
        expect: Expect::Exactly(2),
        sql: |r| {
            let a = pick(r, &MODES);
            let b = loop {
                let b = pick(r, &MODES);
                if b != a {
                    break b;
                }
            };
            let y = r.gen_range(1993..=1997);
            format!(
                "SELECT l_shipmode,
                 sum(CASE WHEN o_orderpriority IN ('1-URGENT', '2-HIGH') THEN 1 ELSE 0 END),
                 sum(CASE WHEN o_orderpriority NOT IN ('1-URGENT', '2-HIGH') THEN 1 ELSE 0 END)
                 FROM orders, lineitem WHERE o_orderkey = l_orderkey AND l_shipmode IN ('{a}', '{b}')
                 AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate
                 AND l_receiptdate >= date '{y}-01-01' AND l_receiptdate < date '{y}-01-01' + interval '1 year'
                 GROUP BY l_shipmode ORDER BY l_shipmode"
            )
        },
    },
    Template {
        name: "Q14",
        expect: Expect::Exactly(1),
        sql: |r| {
            let y = r.gen_range(1993..=1997);
            let m = r.gen_range(1..=12);
            format!(
                "SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount)
                 ELSE 0 END) / sum(l_extendedprice * (1 - l_discount)) AS promo_revenue
                 FROM lineitem, part WHERE l_partkey = p_partkey
                 AND l_shipdate >= date '{y}-{m:02}-01'
                 AND l_shipdate < date '{y}-{m:02}-01' + interval '1 month'"
            )
        },
    },
];

/// The template called `name`.
pub fn template(name: &str) -> Option<&'static Template> {
    TEMPLATES.iter().find(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn at_least_eight_templates_including_the_papers() {
        assert!(TEMPLATES.len() >= 8);
        for q in ["Q1", "Q3", "Q6", "Q12"] {
            assert!(template(q).is_some(), "{q}");
        }
    }

    #[test]
    fn parameters_are_a_function_of_the_seed() {
        let mut a = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut b = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for t in TEMPLATES {
            assert_eq!((t.sql)(&mut a), (t.sql)(&mut b));
        }
        assert!(Expect::Between(1, 5).accepts(5) && !Expect::Exactly(4).accepts(3));
    }

    #[test]
    fn load_sizes_follow_the_scale() {
        let s = load_sql(0.01);
        assert!(s.contains("generate_series(1, 15000) o"), "orders");
        assert!(s.contains("generate_series(1, 100) i"), "suppliers");
    }
}
