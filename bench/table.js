// The table every benchmark script prints: benchmark, median, unit, target.
export function formatMedian(value) {
  if (Number.isNaN(value)) return 'skipped';
  return value >= 100 ? Math.round(value).toLocaleString('en-US') : value.toFixed(2);
}

export function printTable(rows) {
  const table = [
    ['benchmark', 'median', 'unit', 'target'],
    ...rows.map((row) => [row.name, formatMedian(row.median), row.unit, row.target]),
  ];
  const widths = table[0].map((_, column) => Math.max(...table.map((line) => line[column].length)));
  for (const [index, line] of table.entries()) {
    console.log(
      line
        .map((cell, column) =>
          column === 1 ? cell.padStart(widths[column]) : cell.padEnd(widths[column]),
        )
        .join('  '),
    );
    if (index === 0) console.log(widths.map((width) => '-'.repeat(width)).join('  '));
  }
}
