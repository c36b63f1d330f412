// worker.py is embedded into the bundle as text.
declare module "*.py" {
  const text: string;
  export default text;
}
