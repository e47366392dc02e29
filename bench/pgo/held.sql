-- bench/pgo: the held-apart workload (SQLite subject): other sizes, other
-- queries, run to time the variants (never used for training).
CREATE TABLE author(id INTEGER PRIMARY KEY, name TEXT, country TEXT);
CREATE TABLE book(id INTEGER PRIMARY KEY, author INTEGER, title TEXT, year INTEGER, pages INTEGER);
CREATE TABLE loan(id INTEGER PRIMARY KEY, book INTEGER, reader INTEGER, days INTEGER);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 5000)
INSERT INTO author SELECT i, 'author' || (i * 104729 % 5000), 'country' || (i % 53) FROM c;
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 60000)
INSERT INTO book SELECT i, 1 + i * 31 % 5000, 'title ' || hex(i * 40503 % 1048576), 1900 + i % 120, 50 + i * 17 % 900 FROM c;
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 800000)
INSERT INTO loan SELECT i, 1 + i * 11 % 60000, i % 27000, 1 + i % 60 FROM c;
CREATE INDEX loan_book ON loan(book);
CREATE INDEX book_author ON book(author);
SELECT country, count(DISTINCT reader), avg(days) FROM loan JOIN book ON book.id = loan.book
  JOIN author ON author.id = book.author GROUP BY country ORDER BY 2 DESC;
SELECT year / 10 * 10 AS decade, count(*), sum(pages) FROM book WHERE title LIKE '%A%' GROUP BY decade ORDER BY decade;
SELECT a.name, count(*) FROM author a JOIN book b ON b.author = a.id JOIN loan l ON l.book = b.id
  WHERE l.days > 30 GROUP BY a.name ORDER BY 2 DESC, 1 LIMIT 100;
SELECT reader, sum(days) FROM loan GROUP BY reader HAVING sum(days) > 450 ORDER BY 2 DESC LIMIT 200;
UPDATE loan SET days = days + 1 WHERE reader % 7 = 3;
DELETE FROM loan WHERE days > 55 AND book % 3 = 0;
SELECT count(*), sum(days), max(book) FROM loan;
SELECT lower(title), length(title) * pages FROM book ORDER BY pages DESC, title LIMIT 300;
SELECT b.title, (SELECT count(*) FROM loan WHERE loan.book = b.id) AS n FROM book b WHERE b.id % 97 = 0 ORDER BY n DESC, b.title;
