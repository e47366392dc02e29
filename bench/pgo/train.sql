-- bench/pgo: the training workload (SQLite subject): a small shop database.
CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT, city TEXT, born INTEGER);
CREATE TABLE item(id INTEGER PRIMARY KEY, title TEXT, price REAL, kind INTEGER);
CREATE TABLE sale(id INTEGER PRIMARY KEY, customer INTEGER, item INTEGER, qty INTEGER, day INTEGER);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 3000)
INSERT INTO customer SELECT i, 'name' || (i * 7919 % 1000), 'city' || (i % 37), 1950 + i % 60 FROM c;
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 800)
INSERT INTO item SELECT i, 'item ' || hex(i * 2654435761 % 65536), (i * 37 % 1000) / 10.0, i % 9 FROM c;
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 40000)
INSERT INTO sale SELECT i, 1 + i * 7 % 3000, 1 + i * 13 % 800, 1 + i % 5, i % 365 FROM c;
CREATE INDEX sale_customer ON sale(customer);
SELECT city, count(*), sum(qty * price) FROM sale JOIN customer ON customer.id = sale.customer
  JOIN item ON item.id = sale.item GROUP BY city ORDER BY 3 DESC;
SELECT kind, avg(price), max(qty) FROM sale JOIN item ON item.id = sale.item WHERE day BETWEEN 30 AND 200 GROUP BY kind;
SELECT name, count(*) AS n FROM customer JOIN sale ON sale.customer = customer.id
  WHERE name LIKE 'name1%' GROUP BY name HAVING n > 3 ORDER BY n DESC, name LIMIT 50;
SELECT day, sum(qty) FROM sale GROUP BY day ORDER BY day;
UPDATE item SET price = price * 1.1 WHERE kind IN (1, 3, 5);
DELETE FROM sale WHERE qty = 5 AND day % 2 = 0;
SELECT count(*), sum(qty) FROM sale;
SELECT upper(substr(title, 6)), length(title) FROM item ORDER BY title LIMIT 100;
