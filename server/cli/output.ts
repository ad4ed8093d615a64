// Terminal colour only when writing to a terminal (and NO_COLOR is unset), so piped output stays plain.
const useColor = process.stdout.isTTY === true && !process.env.NO_COLOR;
const wrap = (code: number, reset: number) => (s: string) => (useColor ? `\u001b[${code}m${s}\u001b[${reset}m` : s);

export const paint = {
  red: wrap(31, 39),
  green: wrap(32, 39),
  yellow: wrap(33, 39),
  dim: wrap(2, 22),
  bold: wrap(1, 22),
};
