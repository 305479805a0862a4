-- A corpus of SQL as analysts and BI tools write it, for dpsql's acceptance rate (issue 29 item 11).
--
-- Every statement was written for this corpus, in the shapes of the sources named in each section's header
-- (their documentation, tutorials and tests, and the SQL BI tools generate), adapted to two test tables:
--   people(age, sex, race, education, marital, region, hours_per_week, income): dpsql's demo table
--     (dpsql/demo_data.py), standing in for SmartNoise's PUMS (age, sex, educ, race, income, married),
--     BigQuery's/ZetaSQL's and Tumult's example tables;
--   visits(user_id, visit_date, region, channel, amount, pages): one row per visit, privacy unit user_id
--     (at most 4 rows each), with a date column for time series;
--   regions(region, population, division): a public table (lookups, joins with DP results).
-- Categories: dp_engine (what other DP SQL engines' docs and tests ask) and bi (dashboards: Superset,
-- Metabase, Looker, Tableau). A section header is "-- == <category>: <source> ==". Statements end with ";"
-- at the end of a line. Read by benchmarks/sql_corpus.py and tests/test_sql_corpus.py.

-- == dp_engine: SmartNoise SQL (docs: "SQL queries"; tests: PUMS validated queries) ==
SELECT COUNT(*) FROM people;
SELECT COUNT(*) AS n FROM people;
SELECT SUM(income) FROM people;
SELECT AVG(income) FROM people;
SELECT AVG(age) AS avg_age FROM people;
SELECT sex, COUNT(*) AS n FROM people GROUP BY sex;
SELECT marital, AVG(income) AS income, COUNT(*) AS n FROM people GROUP BY marital;
SELECT COUNT(*) AS n FROM people WHERE age > 80 GROUP BY education;
SELECT education, COUNT(*) AS n FROM people WHERE age > 30 GROUP BY education ORDER BY education;
SELECT sex, AVG(age) AS age FROM people GROUP BY sex ORDER BY age DESC;
SELECT race, sex, COUNT(*) AS n, SUM(income) AS total FROM people GROUP BY race, sex;
SELECT race, COUNT(*) AS n FROM people GROUP BY race HAVING COUNT(*) > 100;
SELECT race, COUNT(*) AS n FROM people GROUP BY race HAVING n > 100 ORDER BY n DESC LIMIT 3;
SELECT sex, VAR(age) AS var_age FROM people GROUP BY sex;
SELECT sex, STDDEV(income) AS sd FROM people GROUP BY sex;
SELECT VARIANCE(income) FROM people;
SELECT STD(age) FROM people;
SELECT COUNT(age) FROM people;
SELECT COUNT(income) AS n_income, SUM(income) AS total FROM people WHERE sex = 'F';
SELECT AVG(income) AS mean, COUNT(*) AS n FROM people WHERE age BETWEEN 20 AND 40;
SELECT marital, SUM(income) / COUNT(*) AS mean_income FROM people GROUP BY marital;
SELECT sex, AVG(income) * 2 AS doubled FROM people GROUP BY sex;
SELECT COUNT(*) FROM people WHERE education IN ('Bachelors', 'Masters', 'Doctorate');
SELECT COUNT(*) FROM people WHERE NOT (sex = 'M');
SELECT COUNT(*) FROM people WHERE age >= 18 AND region <> 'South';
SELECT region, COUNT(*) FROM people WHERE income > 50000 OR age < 25 GROUP BY region;
SELECT sex, MIN(age) AS youngest, MAX(age) AS oldest FROM people GROUP BY sex;
SELECT sex, COUNT(*) AS n FROM (SELECT * FROM people WHERE age > 30) AS t GROUP BY sex;
SELECT married, COUNT(*) AS n FROM (SELECT marital AS married FROM people) AS p GROUP BY married;
SELECT education, AVG(income) AS income FROM (SELECT education, income FROM people WHERE sex = 'F') s GROUP BY education;
SELECT CASE WHEN age < 30 THEN 'young' WHEN age < 60 THEN 'middle' ELSE 'old' END AS cohort, COUNT(*) AS n FROM people GROUP BY cohort;
SELECT COUNT(*) AS n, SUM(CASE WHEN sex = 'F' THEN 1 ELSE 0 END) AS women FROM people;
SELECT AVG(CASE WHEN income > 100000 THEN 1.0 ELSE 0.0 END) AS share_rich FROM people;
SELECT region, COUNT(*) AS n FROM people GROUP BY region ORDER BY region LIMIT 2 OFFSET 1;
SELECT sex, race, AVG(age) FROM people GROUP BY sex, race ORDER BY sex, race;
SELECT COUNT(*) FROM people AS p WHERE p.age > 65;
SELECT p.sex, COUNT(*) FROM people p GROUP BY p.sex;
SELECT sex, ROUND(AVG(income), 2) AS income FROM people GROUP BY sex;
SELECT COUNT(*) FROM people WHERE hours_per_week IS NULL;
SELECT COUNT(*) FROM people WHERE hours_per_week IS NOT NULL AND hours_per_week >= 40;
SELECT sex, SUM(hours_per_week) AS hours FROM people GROUP BY sex;
SELECT sex, AVG(hours_per_week) FROM people WHERE hours_per_week > 0 GROUP BY sex;
SELECT COUNT(*) FROM people WHERE educ IN (2, 3);
SELECT COUNT(DISTINCT person_id) FROM people;

-- == dp_engine: Google differential privacy / ZetaSQL / BigQuery DIFFERENTIAL_PRIVACY clause (docs examples, plain-SQL shape) ==
SELECT region, COUNT(*) AS visits FROM visits GROUP BY region;
SELECT region, AVG(amount) AS average_amount FROM visits GROUP BY region;
SELECT channel, SUM(amount) AS total FROM visits GROUP BY channel;
SELECT channel, COUNT(*) AS times_visited FROM visits GROUP BY channel ORDER BY channel;
SELECT region, PERCENTILE_CONT(amount, 0.5) AS median_amount FROM visits GROUP BY region;
SELECT region, QUANTILE_CONT(amount, 0.9) AS p90 FROM visits GROUP BY region;
SELECT region, MEDIAN(pages) AS median_pages FROM visits GROUP BY region;
SELECT COUNT(DISTINCT user_id) AS visitors FROM visits;
SELECT region, COUNT(DISTINCT user_id) AS visitors FROM visits GROUP BY region;
SELECT COUNT(user_id) FROM visits;
SELECT channel, COUNT(*) AS n, AVG(pages) AS pages FROM visits WHERE amount > 10 GROUP BY channel;
SELECT region, SUM(pages) FROM visits WHERE channel = 'web' GROUP BY region;
SELECT AVG(amount) FROM visits WHERE region IN ('West', 'South');
SELECT channel, STDDEV_POP(amount) FROM visits GROUP BY channel;
SELECT channel, VAR_SAMP(pages) FROM visits GROUP BY channel;
SELECT channel, VAR_POP(pages), STDDEV_SAMP(pages) FROM visits GROUP BY channel;
SELECT region, channel, COUNT(*) FROM visits GROUP BY region, channel ORDER BY region, channel;
SELECT COUNT(*) AS n FROM visits WHERE pages BETWEEN 5 AND 10;
SELECT region, SUM(amount) AS total, COUNT(*) AS n FROM visits GROUP BY 1 ORDER BY 1;
SELECT region, APPROX_QUANTILES(amount, 4) FROM visits GROUP BY region;
SELECT EXTRACT(YEAR FROM visit_date) AS year, COUNT(*) AS n FROM visits GROUP BY year ORDER BY year;
SELECT COUNT(*) AS users FROM (SELECT DISTINCT user_id FROM visits WHERE channel = 'web') AS u;
SELECT region, COUNT(*) AS users FROM (SELECT DISTINCT user_id, region FROM visits) AS u GROUP BY region;
SELECT COUNT(*) FROM visits WHERE visit_date >= DATE '2024-01-01';
SELECT region, AVG(amount) FROM visits WHERE visit_date BETWEEN '2023-06-01' AND '2023-08-31' GROUP BY region;

-- == dp_engine: PipelineDP (count, sum, mean, variance, privacy_id_count per partition) ==
SELECT channel, COUNT(*) AS count, SUM(amount) AS sum, AVG(amount) AS mean FROM visits GROUP BY channel;
SELECT channel, VARIANCE(amount) AS variance FROM visits GROUP BY channel;
SELECT region, COUNT(DISTINCT user_id) AS privacy_id_count, COUNT(*) AS count FROM visits GROUP BY region;
SELECT pages, COUNT(*) FROM visits GROUP BY pages;
SELECT channel, SUM(pages) AS pages, COUNT(*) AS n FROM visits WHERE pages <= 20 GROUP BY channel;
SELECT region, AVG(pages) FROM visits GROUP BY region HAVING AVG(pages) > 2;
SELECT EXTRACT(DOW FROM visit_date) AS weekday, COUNT(*) FROM visits GROUP BY weekday ORDER BY weekday;
SELECT DATE_TRUNC('week', visit_date) AS week, COUNT(*) FROM visits GROUP BY week ORDER BY week;

-- == dp_engine: Tumult Analytics (tutorials: groupby, count, sum, average, median, quantile, stdev, count_distinct, KeySet of public groups) ==
SELECT COUNT(*) FROM people WHERE age < 18;
SELECT education, COUNT(*) FROM people GROUP BY education;
SELECT region, race, COUNT(*) FROM people GROUP BY region, race;
SELECT region, AVG(age) AS age_average FROM people GROUP BY region;
SELECT region, SUM(income) AS income_sum FROM people GROUP BY region;
SELECT region, MEDIAN(age) AS age_median FROM people GROUP BY region;
SELECT education, QUANTILE_CONT(income, 0.25) AS q1, QUANTILE_CONT(income, 0.75) AS q3 FROM people GROUP BY education;
SELECT region, STDDEV(age) AS age_stdev FROM people GROUP BY region;
SELECT region, VARIANCE(age) AS age_variance FROM people GROUP BY region;
SELECT region, MIN(age), MAX(age) FROM people GROUP BY region;
SELECT r.division, COUNT(*) FROM people p JOIN regions r ON p.region = r.region GROUP BY r.division;
SELECT r.region, COUNT(*) FROM people p LEFT JOIN regions r ON p.region = r.region GROUP BY r.region;
SELECT marital, COUNT(*) FROM people WHERE age >= 18 AND age < 65 GROUP BY marital;
SELECT sex, COUNT(*) FILTER (WHERE income > 0) AS earners, COUNT(*) AS n FROM people GROUP BY sex;
SELECT COUNT(DISTINCT user_id) FROM visits WHERE channel = 'store';
SELECT channel, COUNT(DISTINCT user_id) FROM visits GROUP BY channel;
SELECT channel, COUNT(*) FROM (SELECT DISTINCT channel, user_id FROM visits WHERE pages > 1) d GROUP BY channel;
SELECT age, COUNT(*) FROM people GROUP BY age ORDER BY age;
SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) FROM people GROUP BY decade ORDER BY decade;

-- == dp_engine: OpenDP (SQL/Polars context examples: counts, sums, means, filters, group_by) ==
SELECT COUNT(*) AS len FROM people;
SELECT sex, COUNT(*) AS len FROM people GROUP BY sex;
SELECT SUM(hours_per_week) AS hours FROM people WHERE hours_per_week IS NOT NULL;
SELECT AVG(income) AS mean_income FROM people WHERE income IS NOT NULL;
SELECT education, sex, COUNT(*) AS len, AVG(income) AS mean FROM people GROUP BY education, sex;
SELECT region, QUANTILE_DISC(age, 0.5) AS median_age FROM people GROUP BY region;
SELECT marital, SUM(income) AS s FROM people WHERE age > 21 GROUP BY marital;
SELECT COUNT(*) FROM people WHERE sex = 'F' AND education = 'Doctorate';
SELECT race, COUNT(*) AS len FROM people WHERE region = 'West' GROUP BY race ORDER BY len DESC;
SELECT COUNT(*) FROM people WHERE income BETWEEN 20000 AND 60000;

-- == dp_engine: Qrlew (SQL rewriting examples: CTEs, subqueries, expressions in aggregates, CASE, COALESCE, JOIN with public tables) ==
WITH adults AS (SELECT * FROM people WHERE age >= 18) SELECT region, COUNT(*) AS n FROM adults GROUP BY region;
WITH adults AS (SELECT * FROM people WHERE age >= 18), rich AS (SELECT * FROM adults WHERE income > 80000) SELECT sex, COUNT(*) FROM rich GROUP BY sex;
WITH t AS (SELECT sex, income FROM people) SELECT sex, AVG(income) FROM t GROUP BY sex;
WITH t AS (SELECT age / 10 AS decade, income FROM people) SELECT decade, AVG(income) FROM t GROUP BY decade;
SELECT SUM(income * 2) FROM people;
SELECT AVG(income / 1000) AS income_k FROM people;
SELECT SUM(COALESCE(hours_per_week, 0)) FROM people;
SELECT AVG(age + 1) FROM people;
SELECT sex, SUM(CASE WHEN age > 50 THEN income ELSE 0 END) AS older_income FROM people GROUP BY sex;
SELECT COUNT(*) FROM people WHERE age + 5 > 30;
SELECT COUNT(*) FROM people WHERE LOWER(sex) = 'f';
SELECT region, COUNT(*) FROM people WHERE region LIKE 'North%' GROUP BY region;
SELECT COUNT(*) FROM people WHERE region IN (SELECT region FROM regions WHERE population > 60);
SELECT AVG(n) AS average_count FROM (SELECT region, COUNT(*) AS n FROM people GROUP BY region) AS t;
SELECT MAX(n) FROM (SELECT education, COUNT(*) AS n FROM people GROUP BY education) counts;
WITH stats AS (SELECT region, COUNT(*) AS n FROM people GROUP BY region) SELECT s.region, s.n, r.population FROM stats s JOIN regions r ON s.region = r.region;
WITH stats AS (SELECT region, AVG(income) AS mean FROM people GROUP BY region) SELECT region, mean FROM stats ORDER BY mean DESC LIMIT 2;
SELECT x.sex, x.n, y.mean FROM (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex) x JOIN (SELECT sex, AVG(income) AS mean FROM people GROUP BY sex) y ON x.sex = y.sex;
SELECT region, COUNT(*) AS n FROM people WHERE age > 20 GROUP BY region UNION ALL SELECT 'all', COUNT(*) FROM people WHERE age > 20;
SELECT AVG(age) FROM people WHERE sex = 'F' UNION ALL SELECT AVG(age) FROM people WHERE sex = 'M';
SELECT 'F' AS sex, COUNT(*) FROM people WHERE sex = 'F' UNION SELECT 'M', COUNT(*) FROM people WHERE sex = 'M';
SELECT sex, COUNT(*) FROM (SELECT sex, age FROM (SELECT * FROM people WHERE income > 0) a WHERE age > 18) b GROUP BY sex;
SELECT COUNT(*) FROM people p JOIN visits v ON p.region = v.region;
SELECT COUNT(*) FROM people WHERE age > (SELECT AVG(age) FROM people);

-- == bi: Apache Superset (generated SQL: big number, bar, pie, table, time series with time grain and row limit) ==
SELECT COUNT(*) AS count FROM people LIMIT 50000;
SELECT region AS region, COUNT(*) AS count FROM people GROUP BY region ORDER BY count DESC LIMIT 10000;
SELECT sex AS sex, SUM(income) AS "SUM(income)" FROM people GROUP BY sex ORDER BY "SUM(income)" DESC LIMIT 100;
SELECT education AS education, AVG(income) AS "AVG(income)" FROM people GROUP BY education ORDER BY "AVG(income)" DESC LIMIT 10000;
SELECT race AS race, region AS region, COUNT(*) AS count FROM people GROUP BY race, region ORDER BY count DESC LIMIT 10000;
SELECT marital AS marital, COUNT(*) AS count FROM people WHERE age >= 18 GROUP BY marital LIMIT 100;
SELECT DATE_TRUNC('month', visit_date) AS __timestamp, COUNT(*) AS count FROM visits GROUP BY DATE_TRUNC('month', visit_date) LIMIT 10000;
SELECT DATE_TRUNC('month', visit_date) AS __timestamp, SUM(amount) AS "SUM(amount)" FROM visits WHERE visit_date >= '2023-01-01 00:00:00' AND visit_date < '2024-01-01 00:00:00' GROUP BY DATE_TRUNC('month', visit_date) LIMIT 10000;
SELECT DATE_TRUNC('day', visit_date) AS __timestamp, COUNT(*) AS count FROM visits GROUP BY DATE_TRUNC('day', visit_date) ORDER BY count DESC LIMIT 1000;
SELECT DATE_TRUNC('year', visit_date) AS __timestamp, channel AS channel, COUNT(*) AS count FROM visits GROUP BY DATE_TRUNC('year', visit_date), channel LIMIT 10000;
SELECT DATE_TRUNC('quarter', visit_date) AS __timestamp, AVG(amount) AS "AVG(amount)" FROM visits GROUP BY DATE_TRUNC('quarter', visit_date) LIMIT 10000;
SELECT DATE_TRUNC('week', visit_date) AS __timestamp, COUNT(DISTINCT user_id) AS "COUNT_DISTINCT(user_id)" FROM visits GROUP BY DATE_TRUNC('week', visit_date) LIMIT 10000;
SELECT channel AS channel, COUNT(*) AS count FROM visits WHERE region IN ('West', 'South') GROUP BY channel ORDER BY count DESC LIMIT 10000;
SELECT region AS region, SUM(amount) AS "SUM(amount)", COUNT(*) AS count FROM visits GROUP BY region ORDER BY "SUM(amount)" DESC LIMIT 10;
SELECT AVG(amount) AS "AVG(amount)" FROM visits WHERE channel = 'web';
SELECT SUM(amount) AS "SUM(amount)" FROM visits WHERE visit_date >= '2024-01-01' AND visit_date < '2024-02-01';
SELECT sex AS sex, COUNT(*) AS count FROM people WHERE education IN ('Bachelors', 'Masters') GROUP BY sex ORDER BY count DESC LIMIT 10000;
SELECT region AS region, COUNT(*) AS count FROM people GROUP BY region HAVING COUNT(*) > 10 ORDER BY count DESC LIMIT 10000;
SELECT CASE WHEN age < 18 THEN 'minor' ELSE 'adult' END AS age_group, COUNT(*) AS count FROM people GROUP BY CASE WHEN age < 18 THEN 'minor' ELSE 'adult' END ORDER BY count DESC LIMIT 10000;
SELECT region AS region, MAX(income) AS "MAX(income)" FROM people GROUP BY region ORDER BY "MAX(income)" DESC LIMIT 10000;
SELECT education AS education, sex AS sex, SUM(income) AS "SUM(income)" FROM people GROUP BY education, sex LIMIT 50000;
SELECT DATE_TRUNC('month', visit_date) AS __timestamp, region AS region, COUNT(*) AS count FROM visits JOIN (SELECT region AS region__, COUNT(*) AS mme_inner__ FROM visits GROUP BY region ORDER BY mme_inner__ DESC LIMIT 5) AS anon_1 ON region = region__ GROUP BY DATE_TRUNC('month', visit_date), region LIMIT 10000;
SELECT COUNT(*) AS count FROM (SELECT * FROM people WHERE region = 'West') AS virtual_table LIMIT 1000;
SELECT sex AS sex, AVG(age) AS "AVG(age)" FROM (SELECT sex, age FROM people WHERE age >= 18) AS virtual_table GROUP BY sex ORDER BY "AVG(age)" DESC LIMIT 1000;
SELECT race AS race, COUNT(*) AS count FROM (SELECT * FROM people) AS virtual_table GROUP BY race ORDER BY count DESC LIMIT 5;

-- == bi: Metabase (generated SQL: quoted qualified names, breakouts, date_trunc by month, custom expressions, source subquery) ==
SELECT COUNT(*) AS "count" FROM "people";
SELECT "people"."region" AS "region", COUNT(*) AS "count" FROM "people" GROUP BY "people"."region" ORDER BY "people"."region" ASC;
SELECT "people"."sex" AS "sex", AVG("people"."income") AS "avg" FROM "people" GROUP BY "people"."sex" ORDER BY "people"."sex" ASC;
SELECT "people"."education" AS "education", SUM("people"."income") AS "sum" FROM "people" GROUP BY "people"."education" ORDER BY "sum" DESC, "people"."education" ASC;
SELECT "people"."race" AS "race", "people"."sex" AS "sex", COUNT(*) AS "count" FROM "people" GROUP BY "people"."race", "people"."sex" ORDER BY "people"."race" ASC, "people"."sex" ASC;
SELECT COUNT(*) AS "count" FROM "people" WHERE "people"."age" >= 65;
SELECT "people"."marital" AS "marital", COUNT(*) AS "count" FROM "people" WHERE ("people"."age" >= 18) AND ("people"."age" < 30) GROUP BY "people"."marital" ORDER BY "people"."marital" ASC;
SELECT DATE_TRUNC('month', "visits"."visit_date") AS "visit_date", COUNT(*) AS "count" FROM "visits" GROUP BY DATE_TRUNC('month', "visits"."visit_date") ORDER BY DATE_TRUNC('month', "visits"."visit_date") ASC;
SELECT DATE_TRUNC('month', "visits"."visit_date") AS "visit_date", SUM("visits"."amount") AS "sum" FROM "visits" GROUP BY DATE_TRUNC('month', "visits"."visit_date") ORDER BY DATE_TRUNC('month', "visits"."visit_date") ASC;
SELECT CAST("visits"."visit_date" AS date) AS "visit_date", COUNT(*) AS "count" FROM "visits" WHERE "visits"."visit_date" >= DATE '2024-06-01' GROUP BY CAST("visits"."visit_date" AS date) ORDER BY CAST("visits"."visit_date" AS date) ASC;
SELECT DATE_TRUNC('year', "visits"."visit_date") AS "visit_date", "visits"."channel" AS "channel", COUNT(*) AS "count" FROM "visits" GROUP BY DATE_TRUNC('year', "visits"."visit_date"), "visits"."channel" ORDER BY DATE_TRUNC('year', "visits"."visit_date") ASC, "visits"."channel" ASC;
SELECT EXTRACT(month FROM "visits"."visit_date") AS "visit_date", COUNT(*) AS "count" FROM "visits" GROUP BY EXTRACT(month FROM "visits"."visit_date") ORDER BY EXTRACT(month FROM "visits"."visit_date") ASC;
SELECT COUNT(DISTINCT "visits"."user_id") AS "count" FROM "visits";
SELECT "visits"."region" AS "region", COUNT(DISTINCT "visits"."user_id") AS "count" FROM "visits" GROUP BY "visits"."region" ORDER BY "visits"."region" ASC;
SELECT "visits"."channel" AS "channel", AVG("visits"."pages") AS "avg", SUM("visits"."amount") AS "sum" FROM "visits" GROUP BY "visits"."channel" ORDER BY "visits"."channel" ASC;
SELECT "source"."region" AS "region", COUNT(*) AS "count" FROM (SELECT "people"."region" AS "region", "people"."age" AS "age" FROM "people") AS "source" GROUP BY "source"."region" ORDER BY "source"."region" ASC;
SELECT "source"."band" AS "band", COUNT(*) AS "count" FROM (SELECT "people"."age" AS "age", CASE WHEN "people"."age" < 40 THEN 'under 40' ELSE '40 and over' END AS "band" FROM "people") AS "source" GROUP BY "source"."band" ORDER BY "source"."band" ASC;
SELECT "source"."income_k" AS "income_k", COUNT(*) AS "count" FROM (SELECT "people"."income" / 1000 AS "income_k" FROM "people") AS "source" GROUP BY "source"."income_k" ORDER BY "source"."income_k" ASC;
SELECT "source"."sex" AS "sex", SUM("source"."income") AS "sum" FROM (SELECT "people"."sex" AS "sex", "people"."income" AS "income" FROM "people" WHERE "people"."age" > 25) AS "source" GROUP BY "source"."sex" ORDER BY "source"."sex" ASC;
SELECT "people"."region" AS "region", COUNT(*) AS "count" FROM "people" GROUP BY "people"."region" ORDER BY "count" DESC, "people"."region" ASC LIMIT 3;
SELECT "people"."education" AS "education", COUNT(*) AS "count" FROM "people" WHERE "people"."education" IN ('HS', 'Some college') GROUP BY "people"."education" ORDER BY "people"."education" ASC;
SELECT SUM(CASE WHEN "people"."sex" = 'F' THEN 1 ELSE 0 END) AS "women", COUNT(*) AS "count" FROM "people";
SELECT "people"."region" AS "region", SUM(CASE WHEN "people"."income" > 50000 THEN 1 ELSE 0 END) / COUNT(*) AS "share" FROM "people" GROUP BY "people"."region" ORDER BY "people"."region" ASC;
SELECT "people"."region" AS "region", AVG("people"."hours_per_week") AS "avg" FROM "people" WHERE "people"."hours_per_week" IS NOT NULL GROUP BY "people"."region" ORDER BY "people"."region" ASC;
SELECT COUNT(*) AS "count" FROM "people" WHERE ("people"."region" LIKE 'S%');
SELECT COUNT(*) AS "count" FROM "main"."people";
SELECT "main"."people"."sex" AS "sex", COUNT(*) AS "count" FROM "main"."people" GROUP BY "main"."people"."sex" ORDER BY "main"."people"."sex" ASC;
SELECT "people"."region" AS "region", COUNT(*) AS "count" FROM "people" GROUP BY "people"."region" ORDER BY "people"."region" ASC LIMIT 1048575;
SELECT "visits"."region" AS "region", "visits"."channel" AS "channel", SUM("visits"."amount") AS "sum" FROM "visits" WHERE ("visits"."visit_date" >= DATE '2023-01-01') AND ("visits"."visit_date" < DATE '2024-01-01') GROUP BY "visits"."region", "visits"."channel" ORDER BY "visits"."region" ASC, "visits"."channel" ASC;
SELECT DATE_TRUNC('week', "visits"."visit_date") AS "visit_date", COUNT(*) AS "count" FROM "visits" WHERE "visits"."visit_date" BETWEEN DATE '2024-01-01' AND DATE '2024-03-31' GROUP BY DATE_TRUNC('week', "visits"."visit_date") ORDER BY DATE_TRUNC('week', "visits"."visit_date") ASC;

-- == bi: Looker (generated SQL: view.field aliases, COALESCE(SUM), GROUP BY ordinals, LIMIT 500, derived tables as WITH, dimension groups) ==
SELECT people.region AS "people.region", COUNT(*) AS "people.count" FROM people GROUP BY 1 ORDER BY 2 DESC LIMIT 500;
SELECT people.sex AS "people.sex", COALESCE(SUM(people.income), 0) AS "people.total_income" FROM people GROUP BY 1 ORDER BY 2 DESC LIMIT 500;
SELECT people.education AS "people.education", AVG(people.income) AS "people.average_income" FROM people GROUP BY 1 ORDER BY 1 LIMIT 500;
SELECT people.race AS "people.race", people.sex AS "people.sex", COUNT(*) AS "people.count" FROM people GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 500;
SELECT COUNT(*) AS "people.count" FROM people LIMIT 1;
SELECT COALESCE(SUM(people.income), 0) AS "people.total_income", COUNT(*) AS "people.count" FROM people WHERE people.age >= 21 LIMIT 500;
SELECT people.marital AS "people.marital", COUNT(*) AS "people.count" FROM people WHERE (people.region = 'South') GROUP BY 1 ORDER BY 2 DESC LIMIT 500;
SELECT (DATE_TRUNC('month', visits.visit_date)) AS "visits.visit_month", COUNT(*) AS "visits.count" FROM visits GROUP BY 1 ORDER BY 1 DESC LIMIT 500;
SELECT (DATE_TRUNC('month', visits.visit_date)) AS "visits.visit_month", COALESCE(SUM(visits.amount), 0) AS "visits.total_amount" FROM visits GROUP BY 1 ORDER BY 1 DESC LIMIT 500;
SELECT (DATE_TRUNC('year', visits.visit_date)) AS "visits.visit_year", COUNT(DISTINCT visits.user_id) AS "visits.count_users" FROM visits GROUP BY 1 ORDER BY 1 LIMIT 500;
SELECT (EXTRACT(YEAR FROM visits.visit_date)) AS "visits.visit_year", visits.channel AS "visits.channel", COUNT(*) AS "visits.count" FROM visits GROUP BY 1, 2 ORDER BY 1, 2 LIMIT 500;
SELECT (CAST(visits.visit_date AS DATE)) AS "visits.visit_date", COUNT(*) AS "visits.count" FROM visits WHERE ((visits.visit_date) >= (DATE '2024-12-01') AND (visits.visit_date) < (DATE '2025-01-01')) GROUP BY 1 ORDER BY 1 LIMIT 500;
SELECT visits.channel AS "visits.channel", COALESCE(AVG(visits.amount), 0) AS "visits.average_amount" FROM visits GROUP BY 1 ORDER BY 2 DESC LIMIT 500;
SELECT visits.region AS "visits.region", COUNT(*) AS "visits.count", COALESCE(SUM(visits.pages), 0) AS "visits.total_pages" FROM visits GROUP BY 1 ORDER BY 2 DESC LIMIT 500;
WITH people_facts AS (SELECT region, income, age FROM people WHERE age >= 18) SELECT people_facts.region AS "people_facts.region", AVG(people_facts.income) AS "people_facts.average_income" FROM people_facts GROUP BY 1 ORDER BY 2 DESC LIMIT 500;
WITH adults AS (SELECT * FROM people WHERE age >= 18) SELECT adults.sex AS "adults.sex", COUNT(*) AS "adults.count" FROM adults GROUP BY 1 ORDER BY 1 LIMIT 500;
WITH region_counts AS (SELECT region, COUNT(*) AS n FROM people GROUP BY region) SELECT region_counts.region AS "region_counts.region", region_counts.n AS "region_counts.n" FROM region_counts ORDER BY 2 DESC LIMIT 500;
SELECT people.region AS "people.region", regions.division AS "regions.division", COUNT(*) AS "people.count" FROM people LEFT JOIN regions ON people.region = regions.region GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 500;
SELECT regions.division AS "regions.division", COALESCE(SUM(people.income), 0) AS "people.total_income" FROM people LEFT JOIN regions ON people.region = regions.region GROUP BY 1 ORDER BY 2 DESC LIMIT 500;
SELECT CASE WHEN people.age < 18 THEN '0 to 17' WHEN people.age < 35 THEN '18 to 34' WHEN people.age < 65 THEN '35 to 64' ELSE '65 or Above' END AS "people.age_tier", COUNT(*) AS "people.count" FROM people GROUP BY 1 ORDER BY 1 LIMIT 500;
SELECT people.age AS "people.age", COUNT(*) AS "people.count" FROM people GROUP BY 1 ORDER BY 1 LIMIT 500;
SELECT people.sex AS "people.sex", 1.0 * COUNT(CASE WHEN people.income > 50000 THEN 1 END) / NULLIF(COUNT(*), 0) AS "people.share_high_income" FROM people GROUP BY 1 LIMIT 500;
SELECT people.region AS "people.region", COUNT(*) AS "people.count" FROM people GROUP BY 1 HAVING COUNT(*) > 5 ORDER BY 2 DESC LIMIT 500;
SELECT people.education AS "people.education", COUNT(*) AS "people.count" FROM people WHERE people.education IS NOT NULL GROUP BY 1 ORDER BY 2 DESC LIMIT 5;
SELECT people.region AS "people.region", COUNT(*) AS "people.count" FROM people GROUP BY ROLLUP (1) ORDER BY 1 LIMIT 500;

-- == bi: Tableau (generated SQL: SUM(1) counts, cnt:/sum:/avg: aliases, CAST and TRUNC, CASE groups, HAVING, IN filters) ==
SELECT "people"."sex" AS "sex", SUM(1) AS "cnt:people:ok" FROM "people" "people" GROUP BY 1;
SELECT "people"."region" AS "region", SUM("people"."income") AS "sum:income:ok" FROM "people" "people" GROUP BY 1;
SELECT "people"."education" AS "education", AVG(CAST("people"."income" AS DOUBLE)) AS "avg:income:ok" FROM "people" "people" GROUP BY 1;
SELECT "people"."race" AS "race", COUNT(*) AS "cnt:people:ok" FROM "people" "people" WHERE ("people"."region" IN ('South', 'West')) GROUP BY 1;
SELECT "people"."marital" AS "marital", SUM(1) AS "cnt:people:ok" FROM "people" "people" GROUP BY 1 HAVING (COUNT(1) > 0);
SELECT SUM(1) AS "cnt:people:ok" FROM "people" "people" HAVING (COUNT(1) > 0);
SELECT "people"."sex" AS "sex", "people"."region" AS "region", SUM(CAST("people"."hours_per_week" AS BIGINT)) AS "sum:hours:ok" FROM "people" "people" GROUP BY 1, 2;
SELECT (CASE WHEN "people"."age" < 30 THEN 'Under 30' ELSE 'Over 30' END) AS "Age Group", SUM(1) AS "cnt:people:ok" FROM "people" "people" GROUP BY 1;
SELECT CAST(TRUNC(CAST("people"."age" AS DOUBLE) / 10) AS BIGINT) AS "age (bin)", COUNT(*) AS "cnt:people:ok" FROM "people" "people" GROUP BY 1;
SELECT CAST(DATE_TRUNC('month', CAST("visits"."visit_date" AS DATE)) AS DATE) AS "tmn:visit_date:ok", SUM(1) AS "cnt:visits:ok" FROM "visits" "visits" GROUP BY 1;
SELECT CAST(EXTRACT(YEAR FROM "visits"."visit_date") AS BIGINT) AS "yr:visit_date:ok", SUM("visits"."amount") AS "sum:amount:ok" FROM "visits" "visits" GROUP BY 1;
SELECT CAST(EXTRACT(QUARTER FROM "visits"."visit_date") AS BIGINT) AS "qr:visit_date:ok", COUNT(*) AS "cnt:visits:ok" FROM "visits" "visits" GROUP BY 1;
SELECT "visits"."channel" AS "channel", COUNT(DISTINCT "visits"."user_id") AS "ctd:user_id:ok" FROM "visits" "visits" GROUP BY 1;
SELECT "visits"."region" AS "region", AVG(CAST("visits"."pages" AS DOUBLE)) AS "avg:pages:ok", SUM(1) AS "cnt:visits:ok" FROM "visits" "visits" GROUP BY 1;
SELECT "visits"."channel" AS "channel", SUM("visits"."amount") AS "sum:amount:ok" FROM "visits" "visits" WHERE (("visits"."visit_date" >= DATE '2024-01-01') AND ("visits"."visit_date" <= DATE '2024-12-31')) GROUP BY 1;
SELECT MIN("people"."age") AS "min:age:ok", MAX("people"."age") AS "max:age:ok" FROM "people" "people";
SELECT "people"."region" AS "region", MEDIAN("people"."income") AS "med:income:ok" FROM "people" "people" GROUP BY 1;
SELECT "people"."sex" AS "sex", STDDEV_SAMP(CAST("people"."income" AS DOUBLE)) AS "std:income:ok" FROM "people" "people" GROUP BY 1;
SELECT "people"."region" AS "region", SUM(1) AS "cnt:people:ok" FROM "people" "people" GROUP BY 1 ORDER BY 2 DESC LIMIT 3;
SELECT "people"."sex" AS "sex", SUM(CASE WHEN "people"."age" >= 65 THEN 1 ELSE 0 END) AS "sum:Calculation_senior:ok" FROM "people" "people" GROUP BY 1;

-- == bi: dashboard patterns (ratios, top-N, totals, period over period, percent of total) ==
SELECT region, COUNT(*) AS n FROM people GROUP BY region ORDER BY n DESC LIMIT 3;
SELECT education, AVG(income) AS mean FROM people GROUP BY education ORDER BY mean DESC LIMIT 5;
SELECT race, SUM(income) AS total FROM people GROUP BY race ORDER BY total DESC LIMIT 1;
SELECT sex, SUM(income) / SUM(hours_per_week) AS income_per_hour FROM people GROUP BY sex;
SELECT region, SUM(CASE WHEN sex = 'F' THEN 1 ELSE 0 END) * 100.0 / COUNT(*) AS pct_women FROM people GROUP BY region;
SELECT region, AVG(CASE WHEN marital = 'Married' THEN 1.0 ELSE 0.0 END) AS married_rate FROM people GROUP BY region;
SELECT region, COUNT(*) FILTER (WHERE age >= 65) * 1.0 / COUNT(*) AS senior_share FROM people GROUP BY region;
SELECT sex, COUNT(*) FILTER (WHERE education = 'Doctorate') AS doctors, COUNT(*) FILTER (WHERE education = 'Masters') AS masters FROM people GROUP BY sex;
SELECT region, COUNT(*) AS n FROM people GROUP BY region UNION ALL SELECT 'Total', COUNT(*) FROM people;
SELECT sex, AVG(income) AS mean FROM people GROUP BY sex UNION ALL SELECT 'All', AVG(income) FROM people;
SELECT region, sex, COUNT(*) FROM people GROUP BY ROLLUP (region, sex);
SELECT region, sex, COUNT(*) FROM people GROUP BY CUBE (region, sex);
SELECT region, sex, COUNT(*) FROM people GROUP BY GROUPING SETS ((region), (sex), ());
SELECT region, n, n * 100.0 / SUM(n) OVER () AS pct FROM (SELECT region, COUNT(*) AS n FROM people GROUP BY region) t;
WITH c AS (SELECT region, COUNT(*) AS n FROM people GROUP BY region) SELECT region, n, n * 1.0 / (SELECT SUM(n) FROM c) AS share FROM c ORDER BY share DESC;
WITH c AS (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex) SELECT MAX(n) - MIN(n) AS gap FROM c;
SELECT region, COUNT(*) AS n, RANK() OVER (ORDER BY COUNT(*) DESC) AS rnk FROM people GROUP BY region;
SELECT m, n, n - LAG(n) OVER (ORDER BY m) AS change FROM (SELECT DATE_TRUNC('month', visit_date) AS m, COUNT(*) AS n FROM visits GROUP BY 1) t ORDER BY m;
SELECT EXTRACT(YEAR FROM visit_date) AS y, EXTRACT(MONTH FROM visit_date) AS mo, SUM(amount) FROM visits GROUP BY 1, 2 ORDER BY 1, 2;
SELECT STRFTIME(visit_date, '%Y-%m') AS month, COUNT(*) FROM visits GROUP BY month ORDER BY month;
SELECT COUNT(*) FILTER (WHERE visit_date >= DATE '2024-01-01') AS this_year, COUNT(*) FILTER (WHERE visit_date < DATE '2024-01-01') AS last_year FROM visits;
SELECT channel, SUM(amount) AS revenue, SUM(amount) / COUNT(*) AS per_visit FROM visits GROUP BY channel ORDER BY revenue DESC;
SELECT channel, AVG(amount) AS mean, COUNT(*) AS n FROM visits WHERE region = 'West' GROUP BY channel ORDER BY n DESC LIMIT 2;
SELECT region, SUM(amount) AS total FROM visits GROUP BY region HAVING SUM(amount) > 0 ORDER BY total DESC;
SELECT pages, COUNT(*) AS n FROM visits WHERE pages <= 10 GROUP BY pages ORDER BY pages;
SELECT CASE WHEN amount < 50 THEN 'small' WHEN amount < 200 THEN 'medium' ELSE 'large' END AS basket, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1;
SELECT CASE WHEN pages > 10 THEN 'engaged' ELSE 'bounce' END AS kind, AVG(amount) FROM visits GROUP BY 1;
SELECT region, COUNT(*) AS n FROM visits WHERE channel IN ('web', 'mobile') GROUP BY region ORDER BY region;
SELECT COUNT(*) AS n, SUM(amount) AS revenue, AVG(amount) AS aov FROM visits;
SELECT COUNT(DISTINCT user_id) AS users, COUNT(*) AS visits FROM visits;
SELECT region, COUNT(*) AS n FROM visits WHERE visit_date >= CURRENT_DATE - INTERVAL 30 DAY GROUP BY region;
SELECT DATE_TRUNC('month', visit_date) AS month, channel, COUNT(*) AS n FROM visits GROUP BY 1, 2 ORDER BY 1, 2;
SELECT DATE_TRUNC('month', visit_date) AS month, SUM(amount) AS revenue FROM visits WHERE region = 'South' GROUP BY 1 ORDER BY 1;
SELECT DATE_PART('year', visit_date) AS year, AVG(amount) FROM visits GROUP BY 1 ORDER BY 1;
SELECT DAYNAME(visit_date) AS day, COUNT(*) FROM visits GROUP BY 1;
SELECT visit_date, COUNT(*) FROM visits GROUP BY visit_date ORDER BY visit_date;
SELECT sex, AVG(age) AS mean_age, AVG(income) AS mean_income, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex;
SELECT education, COUNT(*) AS n FROM people WHERE region = 'Northeast' AND age BETWEEN 25 AND 54 GROUP BY education ORDER BY education;
SELECT region, AVG(income) AS mean FROM people WHERE education IN ('Bachelors', 'Masters', 'Doctorate') GROUP BY region ORDER BY mean DESC;
SELECT marital, sex, COUNT(*) AS n FROM people GROUP BY marital, sex ORDER BY marital, sex;
SELECT COUNT(*) AS n FROM people WHERE income > 100000;
SELECT SUM(income) AS total, COUNT(*) AS n, SUM(income) / COUNT(*) AS mean FROM people;
SELECT region, COUNT(*) AS n, SUM(income) AS total FROM people GROUP BY region ORDER BY region;
SELECT race, AVG(hours_per_week) AS hours FROM people GROUP BY race ORDER BY race;
SELECT sex, COUNT(*) AS n FROM people WHERE marital <> 'Never married' GROUP BY sex;
SELECT region, COUNT(*) AS n FROM people WHERE age > 17 GROUP BY region ORDER BY 2 DESC;
SELECT 'people' AS source, COUNT(*) AS n FROM people UNION ALL SELECT 'visits', COUNT(*) FROM visits;
SELECT r.region, r.population, c.n FROM regions r JOIN (SELECT region, COUNT(*) AS n FROM people GROUP BY region) c ON r.region = c.region ORDER BY r.region;
SELECT r.division, SUM(c.n) AS n FROM (SELECT region, COUNT(*) AS n FROM people GROUP BY region) c JOIN regions r USING (region) GROUP BY r.division;
SELECT region, GREATEST(COUNT(*), 0) AS n FROM people GROUP BY region;
SELECT region, ROUND(AVG(income)) AS mean FROM people GROUP BY region ORDER BY region;
SELECT sex, CAST(COUNT(*) AS INTEGER) AS n FROM people GROUP BY sex;
