// worker.py is embedded into the binary as a file: importing it gives a path that readFileSync opens
// (inside the executable once compiled, in the checkout otherwise).
declare module "*.py" {
  const path: string;
  export default path;
}
